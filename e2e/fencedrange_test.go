package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/fencing"
	"github.com/relect/relect/shardrange"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The ConfigMaps of TestFencedRangeStamps, and the annotations of
// fencing's ExampleUpdateObject_rangeShards.
const (
	fencedLabel = "relect-e2e-fencedrange"
	stampKey    = "example.relect.io/stamp" // "<shard>/<fence>/<round>"
	stampEvery  = 200 * time.Millisecond    // a holder's pause between two rounds of its range
	// heldReadWithin bounds the wait for the holder's next read of one
	// ConfigMap: a round is a list and up to 12 updates, then stampEvery;
	// on a loaded 2-core machine a CI run saw none in 3 s, so the bound is
	// one no busy machine misses, not a measure of speed.
	heldReadWithin = 60 * time.Second
)

// fenceKeyOf is the annotation in which shard keeps the highest fence
// that wrote the object: one for every shard of the election, as in the
// example, since fences are resourceVersions and a range term runs only
// after every term of an overlapping range before it ended.
func fenceKeyOf(string) string { return "example.relect.io/fence" }

// TestFencedRangeStamps runs fencing's ExampleUpdateObject_rangeShards on
// the real control plane: three candidates share 2 uid-range shards, and
// each shard's holder stamps every ConfigMap of its range, round after
// round, with fencing.UpdateObject and the shard's fence. The holder of
// the shard with more ConfigMaps reads and checks one, and is then cut off
// (its fault proxy black-holed) before it writes: its term ends, another
// candidate takes the shard once its Lease expired and stamps the
// ConfigMap with a newer fence. Healed, the deposed holder's write goes
// out (the end of its term does not stop it, as for a process paused
// between its check and its write): the apiserver refuses it (409, the
// resourceVersion it read is gone), and UpdateObject's fresh read finds
// the newer fence and gives ErrStale. Once the next term has stamped the
// whole range, the deposed holder writes every ConfigMap of it again with
// its old fence: each is refused (ErrStale). The stamps, as a watch of the
// ConfigMaps saw them in the apiserver's order, show for every ConfigMap
// fences of each shard that never go down — two holders' stamps never
// interleave — each the fence of a term the stamping candidate held, and
// no late write's.
func TestFencedRangeStamps(t *testing.T) {
	c := requireCluster(t)
	began := time.Now()
	const n, count = 12, 2
	cs := labelledClient(t, c, fencedLabel)
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fencedrange-%02d", i), Labels: map[string]string{fencedLabel: "1"}}}
		if _, err := cs.CoreV1().ConfigMaps(namespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", cm.Name, err)
		}
	}
	hist := watchStamps(t, cs)
	lease := leaseName(t)
	var fleet []*stamper
	for _, id := range []string{"a", "b", "c"} {
		fleet = append(fleet, startStamper(t, c, id, lease, count))
	}
	waitFor(t, 2*leaseDuration+2*maxAcquireWait()+slack, "every ConfigMap stamped", func() bool { return len(hist.latest()) == n })

	shard, mine := largestRange(t, cs, count) // the most late writes to refuse
	deposed, fence := holderOf(fleet, shard)
	if deposed == nil {
		t.Fatalf("no candidate holds shard %s once every ConfigMap was stamped", shard)
	}
	late, heldRefused := held(t, deposed, shard, mine[0], fence, hist)
	// Until the next term has stamped an object, its fence is still the
	// deposed holder's, which admits that holder's write (same term).
	waitFor(t, stampEvery+slack, "the next term of shard "+shard+" stamping its whole range", func() bool {
		last := hist.latest()
		for _, name := range mine {
			if last[name].fence.Compare(fence) <= 0 {
				return false
			}
		}
		return true
	})
	refused := 0
	if heldRefused {
		refused++
	}
	for _, name := range mine {
		_, err := fencing.UpdateObject(t.Context(), deposed.cms, name, fenceKeyOf(shard), fence, stampChange(shard, fence, -1))
		if !errors.Is(err, fencing.ErrStale) {
			t.Errorf("%s's late write of %s with fence %s: %v, want ErrStale", deposed.id, name, fence, err)
			continue
		}
		refused++
	}
	time.Sleep(2 * stampEvery) // a round more of the holders', after the late writes
	for _, s := range fleet {
		s.stop(t)
	}
	hist.stop()
	evs, werr := hist.all()
	accepted, moves := checkStamps(t, evs, werr, fleet)
	t.Logf("%d ConfigMaps in 2 uid ranges; %s held shard %s (%d ConfigMaps) with fence %s and was cut off; %s", n, deposed.id, shard, len(mine), fence, late)
	t.Logf("writes accepted: %d (%d changes of holder over the ConfigMaps); late writes refused: %d of %d (1 after a 409 and a fresh read, %d by the fence read), in %s",
		accepted, moves, refused, len(mine)+1, len(mine), time.Since(began).Round(time.Millisecond))
}

// held plays the deposed holder's late write: s's loop reads and checks
// name and holds its write; s is cut off; once another term of the shard
// has stamped name, s is healed and its write goes out. It must be refused:
// a 409, then ErrStale on the fresh read. It returns what happened, for
// the log, and whether the write was refused so.
func held(t *testing.T, s *stamper, shard, name string, fence relect.Fence, hist *stampHistory) (string, bool) {
	t.Helper()
	h := s.holdNext(name)
	select {
	case <-h.read:
	case <-time.After(heldReadWithin):
		t.Fatalf("%s did not read %s within %v", s.id, name, heldReadWithin)
	}
	if err := s.proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	var next relect.Fence
	stamped := waitFor(t, leaseDuration+2*maxAcquireWait()+slack, "another term of shard "+shard+" stamping "+name, func() bool {
		st, ok := hist.latest()[name]
		next = st.fence
		return ok && st.shard == shard && st.fence.Compare(fence) > 0
	})
	if err := s.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	// The heal cut the connections that went through the black hole: the
	// write goes out once the client has a new one, as from a process that
	// resumes after a pause.
	waitFor(t, 2*slack, s.id+"'s client reaching the apiserver again", func() bool {
		_, err := s.cms.Get(t.Context(), name, metav1.GetOptions{})
		return err == nil
	})
	conflicts := s.conflicts.Load()
	close(h.release)
	<-h.done
	got := s.conflicts.Load() - conflicts
	refused := errors.Is(h.err, fencing.ErrStale) && h.calls.Load() == 1 && got == 1
	if !refused {
		t.Errorf("%s's held write of %s: %v after %d reads that passed the check and %d conflicts (409); want ErrStale after one of each", s.id, name, h.err, h.calls.Load(), got)
	}
	return fmt.Sprintf("%s was stamped by fence %s %s after the cut; %s's held write then met %d conflicts (409) and ended with: %v", name, next, ms(stamped.Sub(cut)), s.id, got, h.err), refused
}

// holderOf returns the candidate of fleet whose term of shard is open, and
// its fence.
func holderOf(fleet []*stamper, shard string) (*stamper, relect.Fence) {
	for _, s := range fleet {
		for _, tm := range s.termsOf() {
			if tm.shard == shard && tm.end.IsZero() {
				return s, tm.fence
			}
		}
	}
	return nil, ""
}

// largestRange returns the shard (of count uid ranges) that holds the
// most of the test's ConfigMaps, by shardrange's matcher, and their names.
func largestRange(t *testing.T, cs kubernetes.Interface, count int) (shard string, names []string) {
	t.Helper()
	ranges, err := shardrange.Split(shardrange.UID, count)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cs.CoreV1().ConfigMaps(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: fencedLabel})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range ranges {
		var in []string
		for _, cm := range l.Items {
			if ok, _ := r.Matches(&cm); ok {
				in = append(in, cm.Name)
			}
		}
		if len(in) > len(names) {
			shard, names = strconv.Itoa(i), in
		}
	}
	return shard, names
}

// stampChange sets the stamp of round n of shard's term with fence (n < 0:
// a late write's).
func stampChange(shard string, fence relect.Fence, n int) func(*corev1.ConfigMap) error {
	return func(cm *corev1.ConfigMap) error {
		metav1.SetMetaDataAnnotation(&cm.ObjectMeta, stampKey, fmt.Sprintf("%s/%s/%d", shard, fence, n))
		return nil
	}
}

// stampID is a stamp as read back: who wrote it, and in which round.
type stampID struct {
	shard string
	fence relect.Fence
	round int
}

func parseStamp(s string) (stampID, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return stampID{}, fmt.Errorf("stamp %q is not <shard>/<fence>/<round>", s)
	}
	f, err := relect.ParseFence(parts[1])
	if err != nil {
		return stampID{}, fmt.Errorf("stamp %q: %w", s, err)
	}
	round, err := strconv.Atoi(parts[2])
	if err != nil {
		return stampID{}, fmt.Errorf("stamp %q: %w", s, err)
	}
	return stampID{parts[0], f, round}, nil
}

// conflictCounter is a ConfigMap client that counts the 409s its Updates
// get.
type conflictCounter struct {
	typedcorev1.ConfigMapInterface
	conflicts *atomic.Int32
}

func (c conflictCounter) Update(ctx context.Context, cm *corev1.ConfigMap, o metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	got, err := c.ConfigMapInterface.Update(ctx, cm, o)
	if apierrors.IsConflict(err) {
		c.conflicts.Add(1)
	}
	return got, err
}

var _ fencing.ObjectClient[*corev1.ConfigMap] = conflictCounter{}

// quiet is the candidates' logger.
var quiet = slog.New(slog.DiscardHandler)
