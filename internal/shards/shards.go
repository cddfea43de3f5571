package shards

import (
	"encoding/json"
	"maps"
	"sync"

	"github.com/relect/relect/internal/wire"
)

// Shards is one Elector's part in shards: the member while the Elector
// runs (Join), the assigner during each of its terms as the election's
// leader (Assign), and the member's word to the assigner of the table
// version it last saw (Seen). C is the type of the child Electors the
// member starts, one per shard it campaigns for. Its methods are safe for
// concurrent use.
type Shards[C Child] struct {
	cfg   Config
	seen  Seen
	waits waits
	obs   observations
	// member is the member of the Run in progress; nil while none.
	mu     sync.Mutex
	member *member[C]
}

// New returns the shards component of an election configured as cfg; it
// starts nothing.
func New[C Child](cfg Config) *Shards[C] {
	return &Shards[C]{cfg: cfg}
}

// Failing returns the shards whose work keeps failing, each with its
// failures in a row, as the shard table the member last applied names
// them (Stats.ShardFailing); nil when none.
func (s *Shards[C]) Failing() map[string]int {
	return s.seen.failingNow()
}

// Seen is what the member last saw of the shard table: its version, the
// member's word to the assigner — one the assigner did not read or write
// itself is an edit by someone else, and it reads the table again before
// it plans — and the shards it names failing. The zero value is ready; it
// is safe for concurrent use.
type Seen struct {
	mu      sync.Mutex
	rv      string         // guarded by mu
	failing map[string]int // guarded by mu
}

// Saw records table version rv as the one the member saw last, and the
// shards table t names failing; t nil (a table missing, deleted or
// malformed) changes nothing of those.
func (s *Seen) Saw(rv string, t *wire.Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = rv
	if t != nil {
		s.failing = maps.Clone(t.Failing)
	}
}

// failingNow returns a copy of the shards the last table named failing;
// nil when none.
func (s *Seen) failingNow() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failing) == 0 {
		return nil
	}
	return maps.Clone(s.failing)
}

// Version returns the table version the member saw last; "" if none.
func (s *Seen) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

// MaxShards bounds ShardOptions.Count and the number of Names: the table
// is one annotation of a Lease, whose annotations the apiserver limits to
// 256 KiB (TableBudget).
const MaxShards = 1000

// AnnotationLimit is the apiserver's limit on a Lease's annotations, in
// bytes (apimachinery's TotalAnnotationSizeLimitB).
const AnnotationLimit = 256 << 10

// TableBudget is what New lets the shard table's holders and takers take
// (TableSize): AnnotationLimit less 16 KiB for the table Lease's other
// annotations and the table's Out entries.
const TableBudget = AnnotationLimit - 16<<10

// tableLimit is the size the leader lets the whole table take when it
// writes it (wire.Table.Fit): AnnotationLimit less 8 KiB for the table
// Lease's other annotations. Out can add to what New checked, in a fleet
// of long identities many of which fail at once.
const tableLimit = AnnotationLimit - 8<<10

// TableSize estimates the shard table's size, in bytes of JSON, for shards
// whose holder and taker each have an identity of idLen bytes as JSON
// (JSONLen): every shard is named twice, with an identity each time.
func TableSize(shards []string, idLen int) int {
	n := len(`{"holders":{},"takers":{}}`)
	for _, sh := range shards {
		n += 2 * (JSONLen(sh) + idLen + len(`"":"",`))
	}
	return n
}

// JSONLen is the length of s as a JSON string, without its quotes:
// encoding/json writes <, >, &, control characters and U+2028/U+2029 as
// six bytes each.
func JSONLen(s string) int {
	b, err := json.Marshal(s)
	if err != nil {
		return len(s)
	}
	return len(b) - 2
}
