package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/relect/relect"
)

// Label names. The Lease's namespace is "lease_namespace", not "namespace":
// Prometheus' Kubernetes service discovery commonly attaches a "namespace"
// target label (the pod's), which would rename a metric's own "namespace"
// label to "exported_namespace" at scrape time.
const (
	LabelLeaseNamespace = "lease_namespace"
	LabelLease          = "lease"
	LabelIdentity       = "identity"
	LabelVerb           = "verb"
	LabelResult         = "result"
)

// Options configure a Collector.
type Options struct {
	// Namespace and Name are the values of the lease_namespace and lease
	// labels on every metric. Empty means those of the Elector's Lease
	// (relect.Elector.Lease).
	Namespace string
	Name      string

	// IdentityLabel, when true, adds the Elector's holder identity as an
	// "identity" label to every metric, not only to relect_info. Leave it
	// false with relect's default identity (host name plus random digits):
	// that identity changes at every restart of the process, and with it
	// every series, so each restart would start a new set of time series.
	// The target labels Prometheus adds (pod, instance) already tell the
	// processes of a fleet apart. Set it when one process runs several
	// candidates for the same Lease (tests, simulations), or when the
	// identity is stable (the pod name). All Collectors registered on one
	// registry must agree on it: Prometheus requires one set of label names
	// per metric name, and the registry refuses a Collector that differs.
	IdentityLabel bool
}

// Collector is a prometheus.Collector for one Elector. It reads
// Elector.Stats at scrape time. A Collector is safe for concurrent use;
// each Collect takes a single Stats snapshot, so the values of one scrape
// are consistent with each other.
type Collector struct {
	e *relect.Elector

	info, isLeader, term, termsStarted, calls, bucketWait,
	backoffs, backoffSeconds, droppedEvents, lastRenewal, lastContact,
	termRemaining, consecutiveFailures, degraded,
	workStuck, workStuckHandovers, workCheckFailures, workLastBeat,
	shardsHeld, shardMoves, shardGaps, shardGapSeconds *prometheus.Desc
	shardsFailing, shardFailures, shardSetsDiffer *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector for e. It fails if e is nil, or if the
// Lease's namespace or name is empty after defaults (a Lock whose Describe
// is not "namespace/name", with no Options to say). It registers nothing:
// pass the Collector to the registry of your choice.
func NewCollector(e *relect.Elector, opts Options) (*Collector, error) {
	if e == nil {
		return nil, errors.New("relect/metrics: NewCollector: nil Elector")
	}
	opts, err := resolve(e, opts)
	if err != nil {
		return nil, err
	}
	labels := prometheus.Labels{LabelLeaseNamespace: opts.Namespace, LabelLease: opts.Name}
	infoLabels := prometheus.Labels{LabelLeaseNamespace: opts.Namespace, LabelLease: opts.Name, LabelIdentity: e.Identity()}
	if opts.IdentityLabel {
		labels = infoLabels
	}
	desc := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("relect_"+name, help, variable, labels)
	}
	c := &Collector{e: e}
	c.info = prometheus.NewDesc("relect_info",
		"Always 1; its identity label is the holder identity the candidate writes into the Lease.",
		nil, infoLabels)
	c.describeElection(desc)
	c.describeWork(desc)
	c.describeShards(desc)
	return c, nil
}

// resolve applies the defaults of opts from e's Lease, and says what is
// still missing.
func resolve(e *relect.Elector, opts Options) (Options, error) {
	ns, name := e.Lease()
	if opts.Namespace == "" {
		opts.Namespace = ns
	}
	if opts.Name == "" {
		opts.Name = name
	}
	var errs []error
	if opts.Namespace == "" {
		errs = append(errs, errors.New("relect/metrics: Options.Namespace is empty and the Elector's Lease has none"))
	}
	if opts.Name == "" {
		errs = append(errs, errors.New("relect/metrics: Options.Name is empty and the Elector's Lease has none"))
	}
	return opts, errors.Join(errs...)
}

// descFunc makes the descriptor of metric relect_name, with the
// Collector's constant labels and the variable labels given.
type descFunc func(name, help string, variable ...string) *prometheus.Desc

// describeElection sets the descriptors of the election's metrics: the
// term, the calls and their pacing, contact with the API.
func (c *Collector) describeElection(desc descFunc) {
	c.isLeader = desc("is_leader",
		"1 while this candidate leads (Elector.IsLeader), else 0.")
	c.term = desc("term",
		"Number of the current term, the Lease's leaseTransitions at acquisition (for people: storage checks the term's fence); 0 when not leading.")
	c.termsStarted = desc("terms_started_total",
		"Terms this candidate has led (OnStartedLeading calls).")
	c.calls = desc("api_calls_total",
		"Lease API calls by verb and result (relect.CallKey), whether they succeeded or not.",
		LabelVerb, LabelResult)
	c.bucketWait = desc("token_bucket_wait_seconds_total",
		"Seconds Lease API calls waited on the token bucket (Options.RateLimit, RateBurst).")
	c.backoffs = desc("backoffs_total",
		"Backoff waits before a campaign.")
	c.backoffSeconds = desc("backoff_seconds_total",
		"Seconds of backoff waits before a campaign, counted when each wait begins.")
	c.droppedEvents = desc("dropped_events_total",
		"Events dropped because the Events channel's buffer was full.")
	c.lastRenewal = desc("last_renewal_timestamp_seconds",
		"Unix time at which the last successful write naming this candidate (acquisition or renewal) was sent; absent until the first.")
	c.lastContact = desc("last_contact_timestamp_seconds",
		"Unix time at which this candidate last heard from the Lease API: an answer to a call (NotFound and conflicts included) or an event on one of its watches; absent until the first.")
	c.termRemaining = desc("term_remaining_seconds",
		"Seconds until the current term's validity ends unless renewed (on the process's monotonic clock); 0 when not leading.")
	c.consecutiveFailures = desc("consecutive_failures",
		"Lease API calls that failed in a row; hearing from the API (an answer, a watch event) resets it.")
	c.degraded = desc("degraded",
		"1 from Options.DegradedAfter failed Lease API calls in a row until this candidate next hears from the API, else 0.")
}

// describeWork sets the descriptors of work liveness's metrics
// (Options.Work).
func (c *Collector) describeWork(desc descFunc) {
	c.workStuck = desc("work_stuck",
		"1 while this candidate leads and its work is stuck (Options.Work): no beat within BeatWindow, or the check failing CheckFailures times in a row; else 0.")
	c.workStuckHandovers = desc("work_stuck_handovers_total",
		"Terms this candidate ended, handing the lease to the line of succession, because its work was stuck (Options.Work).")
	c.workCheckFailures = desc("work_check_failures",
		"Calls of Options.Work.Check that failed in a row (it runs while this candidate leads or is in the line of succession); 0 after one succeeds.")
	c.workLastBeat = desc("work_last_beat_timestamp_seconds",
		"Unix time at which the current term's work last called relect.Beat; absent when no term's work runs, and before its first beat.")
}

// describeShards sets the descriptors of the shards' metrics
// (Options.Shards).
func (c *Collector) describeShards(desc descFunc) {
	c.shardsHeld = desc("shards_held",
		"Shards this candidate holds now (Options.Shards; relect.Elector.Shards).")
	c.shardMoves = desc("shard_moves_total",
		"Shards whose holder this candidate's shard table changed, over its terms as leader.")
	c.shardGaps = desc("shard_gaps_total",
		"Times this candidate, as leader, saw a shard's Lease taken after it was free (released, missing or expired).")
	c.shardGapSeconds = desc("shard_gap_seconds_total",
		"Seconds shards went without a holder before being taken, as this candidate observed them as leader (shard_gaps_total counts the gaps).")
	c.shardsFailing = desc("shards_failing",
		"Shards whose work keeps failing (their holder gave them up: stuck, or Run returned or panicked), as this candidate, leading, last planned; 0 on a follower.")
	c.shardSetsDiffer = desc("shard_sets_differ",
		"Registered candidates whose shard set (ShardOptions.Count or Names) differs from this leader's, as it last planned; 0 on a follower.")
	c.shardFailures = desc("shard_failures_total",
		"Times a holder gave a shard up because its work failed, as this candidate saw them as leader.")
}

// Describe sends the descriptors of every metric the Collector can send.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

func (c *Collector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		c.info, c.isLeader, c.term, c.termsStarted, c.calls, c.bucketWait,
		c.backoffs, c.backoffSeconds, c.droppedEvents, c.lastRenewal, c.lastContact,
		c.termRemaining, c.consecutiveFailures, c.degraded,
		c.workStuck, c.workStuckHandovers, c.workCheckFailures, c.workLastBeat,
		c.shardsHeld, c.shardMoves, c.shardGaps, c.shardGapSeconds, c.shardsFailing, c.shardFailures, c.shardSetsDiffer,
	}
}

// Collect sends the metrics of one Stats snapshot. The timestamps are
// absent until their first event (the last beat also while no term's work
// runs); api_calls_total has a series for each verb and result seen so far.
// The work metrics are 0 when Options.Work is off, the shard metrics when
// Options.Shards is.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.e.Stats()
	now := time.Now()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(c.info, 1)
	gauge(c.isLeader, boolValue(s.Leading))
	gauge(c.term, float64(s.Term))
	counter(c.termsStarted, float64(s.TermsStarted))
	for k, n := range s.Calls {
		counter(c.calls, float64(n), k.Verb, k.Result)
	}
	counter(c.bucketWait, s.BucketWait.Seconds())
	counter(c.backoffs, float64(s.Backoffs))
	counter(c.backoffSeconds, s.BackoffTime.Seconds())
	counter(c.droppedEvents, float64(s.DroppedEvents))
	if !s.LastRenewal.IsZero() {
		gauge(c.lastRenewal, unixSeconds(s.LastRenewal))
	}
	if !s.LastContact.IsZero() {
		gauge(c.lastContact, unixSeconds(s.LastContact))
	}
	var remaining time.Duration
	if s.Leading {
		// ValidUntil carries a monotonic reading, so this difference is
		// immune to wall-clock steps, as IsLeader is.
		remaining = max(s.ValidUntil.Sub(now), 0)
	}
	gauge(c.termRemaining, remaining.Seconds())
	gauge(c.consecutiveFailures, float64(s.ConsecutiveFailures))
	gauge(c.degraded, boolValue(s.Degraded))
	gauge(c.workStuck, boolValue(s.WorkStuck))
	counter(c.workStuckHandovers, float64(s.WorkStuckHandovers))
	gauge(c.workCheckFailures, float64(s.WorkCheckFailures))
	if !s.LastBeat.IsZero() {
		gauge(c.workLastBeat, unixSeconds(s.LastBeat))
	}
	gauge(c.shardsHeld, float64(s.ShardsHeld))
	counter(c.shardMoves, float64(s.ShardMoves))
	counter(c.shardGaps, float64(s.ShardGaps))
	counter(c.shardGapSeconds, s.ShardGapTime.Seconds())
	gauge(c.shardsFailing, float64(s.ShardsFailing))
	counter(c.shardFailures, float64(s.ShardFailures))
	gauge(c.shardSetsDiffer, float64(s.ShardSetsDiffer))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
