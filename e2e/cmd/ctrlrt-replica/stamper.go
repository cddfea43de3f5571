package main

import (
	"context"
	"maps"
	"strconv"
	"time"

	"github.com/relect/relect"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The label that selects the ConfigMaps to stamp, and the stamp's
// annotations (the e2e test reads them back from every version it sees).
const (
	groupLabel       = "ctrlrt-e2e"
	annotationLeader = "e2e.relect.io/leader"
	annotationTerm   = "e2e.relect.io/term"
	annotationFence  = "e2e.relect.io/fence"
)

// stamper is the reconciler: it stamps each ConfigMap of its group with
// the term that leads, over an older fence only, with an Update
// conditional on the resourceVersion read. In -mode=native there is no term
// and no fence: it stamps its identity over any other's, and the test
// checks the order of the stamps against the order of the replicas' terms.
type stamper struct {
	c        client.Client
	identity string
	group    string
	requeue  time.Duration
	rec      *recorder
	native   bool // controller-runtime's own election (native.go)
}

// setup builds the controller on mgr: the term's manager (ctrlrt), the
// term's own manager (rebuild), or the process's manager (native).
func (s *stamper) setup(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("stamper").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			// Not in native mode: a warm replica's sources, and so its
			// predicates, run while it follows; that is EnableWarmup.
			if !s.native {
				s.rec.check("predicate")
			}
			return o.GetLabels()[groupLabel] == s.group
		}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(s)
}

func (s *stamper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	defer s.rec.reconcileStarted(ctx)()
	if _, ok := relect.FenceFromContext(ctx); !ok && !s.native {
		return reconcile.Result{}, nil
	}
	var cm corev1.ConfigMap
	if err := s.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if st := s.stamp(ctx, cm.Annotations); st != nil {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		maps.Copy(cm.Annotations, st)
		if err := s.c.Update(ctx, &cm); err != nil {
			return reconcile.Result{}, err // a conflict: the queue retries
		}
	}
	return reconcile.Result{RequeueAfter: s.requeue}, nil
}

// stamp returns the annotations that the reconcile with ctx writes over
// old, or nil if old bears them already (or, with relect, a later fence).
func (s *stamper) stamp(ctx context.Context, old map[string]string) map[string]string {
	if s.native {
		if old[annotationLeader] == s.identity {
			return nil
		}
		return map[string]string{annotationLeader: s.identity}
	}
	fence, _ := relect.FenceFromContext(ctx)
	if relect.Fence(old[annotationFence]).Compare(fence) >= 0 {
		return nil
	}
	term, _ := relect.TermFromContext(ctx)
	return map[string]string{annotationLeader: s.identity, annotationTerm: strconv.FormatInt(term, 10), annotationFence: string(fence)}
}
