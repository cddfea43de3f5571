package fencing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/relect/relect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
)

// ObjectClient is what UpdateObject needs of a Kubernetes client: the Get
// and Update of one resource in one namespace. client-go's typed clients
// are ObjectClients as they are: cs.CoreV1().ConfigMaps(ns) is an
// ObjectClient[*corev1.ConfigMap]. Its Update must send the object's
// resourceVersion as a precondition, as the apiserver does with every
// update (it answers 409 Conflict when the object has changed since).
type ObjectClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// UpdateObject writes the Kubernetes object name with fence f, keeping the
// highest fence written in the object's annotation key (docs/fencing.md,
// "A Kubernetes object"): it reads the object, refuses the write if the
// annotation holds a fence newer than f, else applies change to the
// object read, sets the annotation to f and updates the object,
// conditional on the resourceVersion read — so the check and the write
// are one step: a write by anyone in between makes the apiserver answer
// 409 Conflict, and UpdateObject reads again and checks again. An equal
// fence is admitted (the same term writes again); an annotation that is
// not a valid fence (absent, or garbled by hand) is older than every
// fence, so it never blocks a term's write.
//
// It returns the object as updated, or:
//   - an error wrapping ErrNoFence if f is not valid (the zero Fence
//     included): nothing is read or written;
//   - an error naming key if it is not a valid annotation key;
//   - an error wrapping ErrStale, with both fences, if the object holds a
//     newer fence: a newer term has written it, and nothing is written;
//   - change's error, unwrapped, if change fails: nothing is written;
//   - the client's error for any other failure of Get or Update (NotFound,
//     Forbidden, a timeout; apierrors tells them apart);
//   - the 409 Conflict itself after 5 attempts, each on a fresh read, 10
//     ms apart (client-go's retry.DefaultRetry): writers that keep
//     racing for one object are told, not retried without end;
//   - ctx's error if ctx is done between two attempts.
//
// change may be called once per attempt, each time on a fresh read; it
// must not set the annotation key. UpdateObject blocks for its requests
// (and 10 ms between two attempts) and is safe for concurrent use as far
// as c is.
func UpdateObject[T metav1.Object](ctx context.Context, c ObjectClient[T], name, key string, f relect.Fence, change func(T) error) (T, error) {
	var zero T
	if err := checkWrite(f, key); err != nil {
		return zero, err
	}
	var updated T
	err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		obj, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if old := relect.Fence(obj.GetAnnotations()[key]); old.Compare(f) > 0 {
			return fmt.Errorf("%w: the write's fence %s is older than %s, in %s's annotation %s", ErrStale, f, old, name, key)
		}
		if err := change(obj); err != nil {
			return err
		}
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[key] = string(f)
		obj.SetAnnotations(a)
		updated, err = c.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if cerr := ctx.Err(); err != nil && cerr != nil && apierrors.IsConflict(err) {
		return zero, cerr // retry.OnError reports the last conflict in its place
	}
	if err != nil {
		return zero, err
	}
	return updated, nil
}

// checkWrite checks UpdateObject's fence and annotation key.
func checkWrite(f relect.Fence, key string) error {
	if err := checkFence(f); err != nil {
		return err
	}
	if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
		return fmt.Errorf("fencing: annotation key %q: %w", key, errors.New(strings.Join(errs, "; ")))
	}
	return nil
}
