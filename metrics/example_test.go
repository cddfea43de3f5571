package metrics_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/relect/relect"
	"github.com/relect/relect/metrics"
	"github.com/relect/relect/relecttest"
)

// A Collector registered on the caller's own registry, read while leading.
func ExampleNewCollector() {
	api := relecttest.NewLeaseAPI()             // in production: Config: restConfig
	api.PutReleased("default", "my-controller") // taken at once; a missing Lease only after LeaseDuration
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	reg := prometheus.NewRegistry()
	e, err := relect.New(relect.Options{
		Client:    api.Client("pod-a").Clientset(),
		Namespace: "default",
		Name:      "my-controller",
		Identity:  "pod-a",
		OnStartedLeading: func(ctx context.Context) {
			printMetrics(reg, "relect_info", "relect_is_leader", "relect_terms_started_total")
			shutdown()
			<-ctx.Done()
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := metrics.NewCollector(e, metrics.Options{Namespace: "default", Name: "my-controller"})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg.MustRegister(c)
	_ = e.Run(ctx)
	// Output:
	// relect_info{identity="pod-a",lease="my-controller",lease_namespace="default"} 1
	// relect_is_leader{lease="my-controller",lease_namespace="default"} 1
	// relect_terms_started_total{lease="my-controller",lease_namespace="default"} 1
}

// printMetrics prints the named metrics of g, one line per series.
func printMetrics(g prometheus.Gatherer, names ...string) {
	families, err := g.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := ""
			for i, l := range m.GetLabel() {
				if i > 0 {
					labels += ","
				}
				labels += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			fmt.Printf("%s{%s} %g\n", f.GetName(), labels, v)
		}
	}
}
