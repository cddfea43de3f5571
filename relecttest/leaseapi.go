package relecttest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// leasesResource names Leases in API errors.
var leasesResource = schema.GroupResource{Group: coordinationv1.GroupName, Resource: "leases"}

// LeaseAPI is an in-memory store of Leases with the apiserver's optimistic
// concurrency and validation. The zero value is not usable; call NewLeaseAPI.
// A LeaseAPI is safe for concurrent use.
type LeaseAPI struct {
	mu       sync.Mutex
	rv       uint64
	leases   map[types.NamespacedName]*coordinationv1.Lease
	clients  map[string]*Client
	watchers map[*watcher]struct{}
	obs      observers // see Observe
	history  []change  // the changes a watch can resume from (historyWindow), oldest first
}

// NewLeaseAPI returns an empty LeaseAPI.
func NewLeaseAPI() *LeaseAPI {
	return &LeaseAPI{
		leases:   map[types.NamespacedName]*coordinationv1.Lease{},
		clients:  map[string]*Client{},
		watchers: map[*watcher]struct{}{},
	}
}

// Lease returns a copy of the stored Lease, or nil if there is none.
func (a *LeaseAPI) Lease(namespace, name string) *coordinationv1.Lease {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.leases[key(namespace, name)]; l != nil {
		return l.DeepCopy()
	}
	return nil
}

// Leases returns copies of every Lease stored in namespace, sorted by name:
// the election's, and, with relect's candidate registry on, one
// registration per registered candidate.
func (a *LeaseAPI) Leases(namespace string) []*coordinationv1.Lease {
	list, _ := a.list(namespace, metav1.ListOptions{})
	out := make([]*coordinationv1.Lease, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

// Holder returns the Lease's holder identity, or "" if the Lease does not
// exist or has no holder.
func (a *LeaseAPI) Holder(namespace, name string) string {
	l := a.Lease(namespace, name)
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// SetHolder edits the Lease by hand, as `kubectl edit` would: it sets the
// holder identity and the renew time to now, leaves every other field as it
// is, and bumps the resourceVersion. It fails if the Lease does not exist.
func (a *LeaseAPI) SetHolder(namespace, name, holder string) error {
	return a.Edit(namespace, name, func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = &holder
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	})
}

// Edit changes the stored Lease by hand with edit, bypassing validation, so
// that a test can write what a buggy or malicious client might: an empty
// holder, a nil, zero, negative or huge lease duration, a renew time in the
// future. It bumps the resourceVersion and notifies watchers. It fails if the
// Lease does not exist.
func (a *LeaseAPI) Edit(namespace, name string, edit func(*coordinationv1.Lease)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := key(namespace, name)
	l := a.leases[k]
	if l == nil {
		return apierrors.NewNotFound(leasesResource, name)
	}
	l = l.DeepCopy()
	edit(l)
	l.Namespace, l.Name = namespace, name // an edit cannot move it
	a.storeLocked(k, l, watch.Modified)
	return nil
}

// Put stores lease as given (creating or replacing it), bypassing
// validation, bumps its resourceVersion and notifies watchers.
func (a *LeaseAPI) Put(lease *coordinationv1.Lease) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := lease.DeepCopy()
	k := key(l.Namespace, l.Name)
	ev := watch.Modified
	if a.leases[k] == nil {
		ev = watch.Added
		if l.UID == "" {
			l.UID = uuid.NewUUID()
		}
		l.CreationTimestamp = metav1.Now()
	}
	a.storeLocked(k, l, ev)
}

// PutReleased stores the Lease namespace/name as a release leaves it — no
// holder, a lease duration of 1 s, leaseTransitions 0 — creating it or
// replacing the one stored. Candidates take a released Lease at once; a
// missing Lease relect creates only LeaseDuration after finding it missing,
// because it cannot tell one that never existed from one deleted by hand
// while held. Tests that want the first acquisition at once start here. The
// first term is then number 1.
func (a *LeaseAPI) PutReleased(namespace, name string) {
	one, zero := int32(1), int32(0)
	holder := ""
	now := metav1.NowMicro()
	a.Put(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &one,
			LeaseTransitions:     &zero,
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	})
}

// Delete removes the Lease by hand. It fails with NotFound if there is none.
func (a *LeaseAPI) Delete(namespace, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deleteLocked(namespace, name)
}

func (a *LeaseAPI) deleteLocked(namespace, name string) error {
	k := key(namespace, name)
	l := a.leases[k]
	if l == nil {
		return apierrors.NewNotFound(leasesResource, name)
	}
	delete(a.leases, k)
	a.rv++
	gone := l.DeepCopy()
	gone.ResourceVersion = strconv.FormatUint(a.rv, 10)
	a.notifyLocked(watch.Deleted, gone)
	return nil
}

// Client returns the handle named name, creating it on first use. Give each
// candidate its own, so that faults and counts are per candidate.
func (a *LeaseAPI) Client(name string) *Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.clients[name]; c != nil {
		return c
	}
	c := &Client{api: a, name: name, calls: map[string]int{}, resume: make(chan struct{})}
	close(c.resume) // not paused
	a.clients[name] = c
	return c
}

// Clients returns the names of all handles, sorted.
func (a *LeaseAPI) Clients() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.clients))
}

func key(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

// storeLocked bumps the resourceVersion, stores l and notifies watchers.
func (a *LeaseAPI) storeLocked(k types.NamespacedName, l *coordinationv1.Lease, ev watch.EventType) {
	a.rv++
	l.ResourceVersion = strconv.FormatUint(a.rv, 10)
	a.leases[k] = l
	a.notifyLocked(ev, l.DeepCopy())
}

// The verbs below implement the API as a kube-apiserver would.

func (a *LeaseAPI) get(namespace, name string) (*coordinationv1.Lease, error) {
	if l := a.Lease(namespace, name); l != nil {
		return l, nil
	}
	return nil, apierrors.NewNotFound(leasesResource, name)
}

func (a *LeaseAPI) create(namespace string, in *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if in == nil {
		return nil, apierrors.NewBadRequest("relecttest: nil Lease")
	}
	l := in.DeepCopy()
	if l.Namespace != "" && l.Namespace != namespace {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", l.Namespace, namespace))
	}
	l.Namespace = namespace
	if l.Name == "" {
		return nil, invalid(l.Name, "metadata.name", "", "name or generateName is required")
	}
	if l.ResourceVersion != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if err := validateSpec(l); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := key(namespace, l.Name)
	if a.leases[k] != nil {
		return nil, apierrors.NewAlreadyExists(leasesResource, l.Name)
	}
	l.UID = uuid.NewUUID()
	l.CreationTimestamp = metav1.Now()
	a.storeLocked(k, l, watch.Added)
	return l.DeepCopy(), nil
}

func (a *LeaseAPI) update(namespace string, in *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if in == nil {
		return nil, apierrors.NewBadRequest("relecttest: nil Lease")
	}
	l := in.DeepCopy()
	if l.Namespace != "" && l.Namespace != namespace {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", l.Namespace, namespace))
	}
	l.Namespace = namespace
	if err := validateSpec(l); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := key(namespace, l.Name)
	cur := a.leases[k]
	switch {
	case cur == nil:
		return nil, apierrors.NewNotFound(leasesResource, l.Name)
	case l.ResourceVersion == "":
		return nil, invalid(l.Name, "metadata.resourceVersion", l.ResourceVersion, "must be specified for an update")
	case l.ResourceVersion != cur.ResourceVersion:
		return nil, apierrors.NewConflict(leasesResource, l.Name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	l.UID, l.CreationTimestamp = cur.UID, cur.CreationTimestamp
	a.storeLocked(k, l, watch.Modified)
	return l.DeepCopy(), nil
}

func (a *LeaseAPI) list(namespace string, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	sel, err := nameSelector(opts.FieldSelector)
	if err != nil {
		return nil, err
	}
	lsel, err := labelSelector(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(a.rv, 10)}}
	for _, k := range slices.SortedFunc(maps.Keys(a.leases), func(x, y types.NamespacedName) int {
		if c := cmp.Compare(x.Namespace, y.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	}) {
		if (namespace == "" || k.Namespace == namespace) && (sel == "" || sel == k.Name) && lsel.Matches(labels.Set(a.leases[k].Labels)) {
			out.Items = append(out.Items, *a.leases[k].DeepCopy())
		}
	}
	return out, nil
}

// nameSelector accepts an empty field selector or one that selects a single
// name ("metadata.name=NAME"), the form leader-election watches use.
func nameSelector(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return "", apierrors.NewBadRequest(err.Error())
	}
	reqs := sel.Requirements()
	if len(reqs) != 1 || reqs[0].Field != "metadata.name" || (reqs[0].Operator != "=" && reqs[0].Operator != "==") {
		return "", apierrors.NewBadRequest(fmt.Sprintf("relecttest: unsupported field selector %q: only metadata.name=NAME", s))
	}
	return reqs[0].Value, nil
}

// labelSelector parses a label selector (empty: everything).
func labelSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return sel, nil
}

// validateSpec applies the apiserver's validation of a Lease spec.
func validateSpec(l *coordinationv1.Lease) error {
	// The apiserver's own check of metadata.annotations: key syntax, and
	// at most 256 KiB in all (TotalAnnotationSizeLimitB).
	if errs := apivalidation.ValidateAnnotations(l.Annotations, field.NewPath("metadata", "annotations")); len(errs) > 0 {
		return apierrors.NewInvalid(coordinationv1.SchemeGroupVersion.WithKind("Lease").GroupKind(), l.Name, errs)
	}
	s := l.Spec
	switch {
	case s.LeaseDurationSeconds != nil && *s.LeaseDurationSeconds <= 0:
		return invalid(l.Name, "spec.leaseDurationSeconds", *s.LeaseDurationSeconds, "must be greater than 0")
	case s.LeaseTransitions != nil && *s.LeaseTransitions < 0:
		return invalid(l.Name, "spec.leaseTransitions", *s.LeaseTransitions, "must be greater than or equal to 0")
	case s.PreferredHolder != nil && *s.PreferredHolder != "" && (s.Strategy == nil || *s.Strategy == ""):
		return invalid(l.Name, "spec.strategy", "", "must be specified when preferredHolder is set")
	}
	return nil
}

func invalid(name, field string, value any, detail string) error {
	return apierrors.NewInvalid(coordinationv1.SchemeGroupVersion.WithKind("Lease").GroupKind(), name,
		fieldErrorList(field, value, detail))
}

// Error returns the error the apiserver sends with the given HTTP status
// code, as client-go decodes it: 403 Forbidden, 409 Conflict, 429
// TooManyRequests, 500 InternalError, 503 ServiceUnavailable, 504 Timeout,
// or a generic status error for any other code. Use it with Client.FailNext
// and Client.Fail.
func Error(code int) error {
	const name = "relecttest"
	switch code {
	case 403:
		return apierrors.NewForbidden(leasesResource, name, fmt.Errorf("relecttest: injected"))
	case 409:
		return apierrors.NewConflict(leasesResource, name, fmt.Errorf("relecttest: injected"))
	case 429:
		return apierrors.NewTooManyRequests("relecttest: injected", 1)
	case 500:
		return apierrors.NewInternalError(fmt.Errorf("relecttest: injected"))
	case 503:
		return apierrors.NewServiceUnavailable("relecttest: injected")
	case 504:
		return apierrors.NewTimeoutError("relecttest: injected", 1)
	}
	return apierrors.NewGenericServerResponse(code, "", leasesResource, name, "relecttest: injected", 0, true)
}

// errUnsupported is returned by verbs leader election never uses.
func errUnsupported(verb string) error {
	return apierrors.NewMethodNotSupported(leasesResource, verb)
}

func fieldErrorList(path string, value any, detail string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(path), value, detail)}
}
