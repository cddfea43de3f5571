package main

import (
	"context"
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
// conditional on the resourceVersion read.
type stamper struct {
	c        client.Client
	identity string
	group    string
	requeue  time.Duration
	rec      *recorder
}

// setup builds the controller on mgr: the term's manager (ctrlrt), or the
// term's own manager (rebuild).
func (s *stamper) setup(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("stamper").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			s.rec.check("predicate")
			return o.GetLabels()[groupLabel] == s.group
		}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(s)
}

func (s *stamper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	defer s.rec.reconcileStarted(ctx)()
	term, _ := relect.TermFromContext(ctx)
	fence, ok := relect.FenceFromContext(ctx)
	if !ok {
		return reconcile.Result{}, nil
	}
	var cm corev1.ConfigMap
	if err := s.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if relect.Fence(cm.Annotations[annotationFence]).Compare(fence) < 0 {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[annotationLeader] = s.identity
		cm.Annotations[annotationTerm] = strconv.FormatInt(term, 10)
		cm.Annotations[annotationFence] = string(fence)
		if err := s.c.Update(ctx, &cm); err != nil {
			return reconcile.Result{}, err // a conflict: the queue retries
		}
	}
	return reconcile.Result{RequeueAfter: s.requeue}, nil
}
