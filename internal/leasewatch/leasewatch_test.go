package leasewatch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestDecode: each kind of watch event, with a Lease and with another
// object, and a closed channel.
func TestDecode(t *testing.T) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x", ResourceVersion: "7"}}
	other := &corev1.ConfigMap{}
	status := &metav1.Status{Code: 410, Reason: metav1.StatusReasonGone}
	for _, c := range []struct {
		name    string
		ev      watch.Event
		open    bool
		want    Event
		carries bool
	}{
		{"closed", watch.Event{}, false, Event{Kind: Closed}, false},
		{"added", watch.Event{Type: watch.Added, Object: l}, true, Event{Changed, l}, true},
		{"modified", watch.Event{Type: watch.Modified, Object: l}, true, Event{Changed, l}, true},
		{"deleted", watch.Event{Type: watch.Deleted, Object: l}, true, Event{Deleted, l}, true},
		{"deleted, no Lease", watch.Event{Type: watch.Deleted, Object: other}, true, Event{Kind: Deleted}, true},
		{"bookmark", watch.Event{Type: watch.Bookmark, Object: l}, true, Event{Progress, l}, true},
		{"error", watch.Event{Type: watch.Error, Object: status}, true, Event{Kind: Broken}, false},
		{"added, no Lease", watch.Event{Type: watch.Added, Object: other}, true, Event{Kind: Ignored}, false},
		{"bookmark, no Lease", watch.Event{Type: watch.Bookmark, Object: other}, true, Event{Kind: Ignored}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Decode(c.ev, c.open)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.carries, got.CarriesObject())
		})
	}
}
