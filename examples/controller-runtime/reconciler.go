package main

import (
	"context"
	"errors"
	"strconv"

	"github.com/relect/relect"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The label that selects the ConfigMaps to stamp, and the stamp's
// annotations.
const (
	selectLabel, selectValue = "relect-example", "controller-runtime"

	annotationLeader = "example.relect.io/leader"
	annotationTerm   = "example.relect.io/term"
	annotationFence  = "example.relect.io/fence"
)

// reconciler stamps each selected ConfigMap with the term that leads.
type reconciler struct {
	client   client.Client
	identity string
}

// SetupWithManager builds the controller on mgr: the term's manager, so
// the controller is the term's, on the manager's cache.
func (r *reconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("configmap-stamper").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[selectLabel] == selectValue
		}))).
		Complete(r)
}

// Reconcile stamps the ConfigMap with this term's leader, term and fence,
// unless a term with a newer fence stamped it: then this replica has been
// deposed, and leaves it. The Update is conditional on the resourceVersion
// read, so two writers never both succeed from the same read (a conflict is
// retried with the work queue's backoff).
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// The reconcile context derives from the term's: it carries the term,
	// and is cancelled when the term ends.
	term, _ := relect.TermFromContext(ctx)
	fence, ok := relect.FenceFromContext(ctx)
	if !ok {
		return reconcile.Result{}, reconcile.TerminalError(errNoFence)
	}
	var cm corev1.ConfigMap
	if err := r.client.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !stamp(&cm, r.identity, term, fence) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.client.Update(ctx, &cm)
}

// stamp writes the term's stamp into cm and reports whether it changed: not
// if cm carries this fence already, nor if it carries a newer one.
func stamp(cm *corev1.ConfigMap, identity string, term int64, fence relect.Fence) bool {
	if relect.Fence(cm.Annotations[annotationFence]).Compare(fence) >= 0 {
		return false
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[annotationLeader] = identity
	cm.Annotations[annotationTerm] = strconv.FormatInt(term, 10)
	cm.Annotations[annotationFence] = string(fence)
	return true
}

// errNoFence: the term has no fence (relect.Options.Lock, or an apiserver
// whose resourceVersions are not integers); this example will not write
// unfenced.
var errNoFence = errors.New("the term has no fencing token")
