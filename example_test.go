package relect_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
)

// A candidate that leads once and then shuts down: Run returns the context's
// error after the work returned and the lease was released.
func Example() {
	api := relecttest.NewLeaseAPI() // in production: Config: restConfig
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	e, err := relect.New(relect.Options{
		Client:    api.Client("pod-a").Clientset(),
		Namespace: "default",
		Name:      "my-controller",
		Identity:  "pod-a",
		OnStartedLeading: func(ctx context.Context) {
			term, _ := relect.TermFromContext(ctx)
			fmt.Println("leading, term", term)
			shutdown() // for the example; normally the process's signal handler
			<-ctx.Done()
			fmt.Println("work stopped")
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = e.Run(ctx)
	fmt.Println("Run returned:", err)
	fmt.Printf("holder after release: %q\n", api.Holder("default", "my-controller"))
	// Output:
	// leading, term 0
	// work stopped
	// Run returned: context canceled
	// holder after release: ""
}

// Reading Events: they arrive in order, and the channel is closed when Run
// returns.
func ExampleElector_Events() {
	api := relecttest.NewLeaseAPI()
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	e, err := relect.New(relect.Options{
		Client:           api.Client("pod-a").Clientset(),
		Namespace:        "default",
		Name:             "my-controller",
		Identity:         "pod-a",
		OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range e.Events() {
			if ev.Leader == "" {
				fmt.Println(ev.Kind)
			} else {
				fmt.Println(ev.Kind, ev.Leader)
			}
			if ev.Kind == relect.EventStartedLeading {
				shutdown()
			}
		}
	}()
	_ = e.Run(ctx)
	<-done
	// Output:
	// campaigning
	// lease-missing
	// new-leader pod-a
	// started-leading pod-a
	// stopped-leading pod-a
	// released pod-a
}

// Invalid options fail in New, naming each field.
func ExampleNew_invalid() {
	_, err := relect.New(relect.Options{
		Client:           relecttest.NewLeaseAPI().Client("x").Clientset(),
		Namespace:        "default",
		Name:             "my-controller",
		LeaseDuration:    1500 * 1e6, // 1.5 s
		OnStartedLeading: func(context.Context) {},
	})
	fmt.Println(err)
	for _, fe := range relect.FieldErrors(err) {
		fmt.Printf("%s: %s\n", fe.Field, fe.Problem(nil))
	}
	// Output:
	// relect: Options.LeaseDuration 1.5s is not a whole number of seconds (the Lease stores whole seconds)
	// Options.LeaseDuration: 1.5s is not a whole number of seconds (the Lease stores whole seconds)
}

// Work liveness: a leader whose work stops beating hands the lease over to
// the next in line, which can do the work, instead of holding it while
// nothing gets done. Here pod-a's work hangs at once; pod-b leads within
// BeatWindow and two retry periods, and pod-a stays a candidate, passed
// over in the line for Cooldown.
func ExampleOptions_work() {
	api := relecttest.NewLeaseAPI() // in production: Config: restConfig
	api.PutReleased("default", "reporter")
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	candidate := func(identity string, work func(ctx context.Context)) *relect.Elector {
		e, err := relect.New(relect.Options{
			Client:           api.Client(identity).Clientset(),
			Namespace:        "default",
			Name:             "reporter",
			Identity:         identity,
			LeaseDuration:    3 * time.Second,
			RenewDeadline:    2 * time.Second,
			RetryPeriod:      500 * time.Millisecond,
			OnStartedLeading: work,
			Work: relect.WorkOptions{
				BeatWindow: time.Second, // no beat for a second: the work is stuck
				Cooldown:   time.Minute, // then passed over in the line for a minute
			},
		})
		if err != nil {
			panic(err)
		}
		return e
	}
	a := candidate("pod-a", func(ctx context.Context) { <-ctx.Done() }) // hung: never beats
	b := candidate("pod-b", func(ctx context.Context) {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				relect.Beat(ctx) // a round of the work done
			}
		}
	})
	aEvents := a.Events()
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	for ev := range aEvents {
		if ev.Kind == relect.EventStartedLeading {
			break
		}
	}
	bDone := make(chan struct{})
	go func() { _ = b.Run(ctx); close(bDone) }()
	for ev := range aEvents {
		if ev.Kind == relect.EventWorkStuck {
			fmt.Println("pod-a:", errors.Is(ev.Err, relect.ErrWorkStuck), "— its work is stuck; it hands over")
			break
		}
	}
	if _, err := b.WaitForTerm(ctx); err == nil {
		fmt.Println("pod-b leads; pod-a leads:", a.IsLeader())
	}
	shutdown()
	<-done
	<-bDone
	// Output:
	// pod-a: true — its work is stuck; it hands over
	// pod-b leads; pod-a leads: false
}
