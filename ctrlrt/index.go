package ctrlrt

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// indexSet remembers the fields the terms have indexed; its zero value is
// empty and ready. An index belongs
// to the manager's informer, for good; a second IndexField of the same
// field fails (client-go: "indexer conflict"), so the Setup of a
// controller that indexes a field in its SetupWithManager, as kubebuilder's
// do, would fail from the second term on. The index function of the first
// term that indexed a field stays, and runs on every change of the cache,
// on every replica, between terms too: it must be a pure function of the
// object, as controller-runtime expects anyway.
type indexSet struct {
	mu   sync.Mutex // guards done, and serialises the indexing
	done map[indexKey]struct{}
}

type indexKey struct {
	gvk   schema.GroupVersionKind
	field string
}

// index indexes field of obj's type with indexer, unless a term did
// already. An object whose kind the scheme does not know is passed on, for
// the indexer to report.
func (s *indexSet) index(ctx context.Context, indexer client.FieldIndexer, scheme *runtime.Scheme,
	obj client.Object, field string, extract client.IndexerFunc,
) error {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return indexer.IndexField(ctx, obj, field, extract)
	}
	key := indexKey{gvk, field}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.done[key]; ok {
		return nil
	}
	if s.done == nil {
		s.done = map[indexKey]struct{}{}
	}
	if err := indexer.IndexField(ctx, obj, field, extract); err != nil {
		return err
	}
	s.done[key] = struct{}{}
	return nil
}
