// Package wire is relect's format in the Kubernetes API: the annotations a
// relect leader writes into the election's Lease beside its record, the
// registrations — one small Lease per candidate beside the election's —
// and the line Lease, with the rules both the library and package operator
// read them by (which
// annotation is bound to which holder and term, what a release is). It
// makes no API calls. See docs/design.md, "Succession", "Only the line
// watches", "Fencing tokens, and term numbers" and "Requests".
package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The annotations of the election's Lease. Each carries the
// leaseTransitions (and, but the succession, the holder) of the record it
// was written with: a client-go candidate that takes the Lease over keeps
// the annotations it read, and a stale annotation is recognised by its
// term and ignored.
const (
	// AnnotationSuccession holds a Succession: the leader's successors, in
	// order.
	AnnotationSuccession = "relect.io/succession"
	// AnnotationHandOver marks a record written by HandOver: the holder
	// named in it has not acquired the lease yet, and may take it at once.
	AnnotationHandOver = "relect.io/handover"
	// AnnotationFence holds a FenceMark: the fence of the holder's term,
	// written with the term's next write after the one that began it.
	AnnotationFence = "relect.io/fence"
	// AnnotationRequest holds a Request.
	AnnotationRequest = "relect.io/request"
)

// Registration labels and annotations.
const (
	// LabelCandidateOf marks a registration with the election's Lease
	// name (or a hash of it, if it does not fit a label value).
	LabelCandidateOf = "relect.io/candidate-of"
	// AnnotationLease is the election's Lease name, for people.
	AnnotationLease = "relect.io/lease"
	// AnnotationPriority is Options.Priority.
	AnnotationPriority = "relect.io/priority"
	// AnnotationStandby is "true" for a candidate standing by.
	AnnotationStandby = "relect.io/standby"
	// AnnotationInstance is a random name of the Elector that wrote the
	// registration, so that two processes sharing one identity can tell
	// each other's writes from their own (duplicate identities).
	AnnotationInstance = "relect.io/instance"
	// AnnotationWards is "true" for a candidate that can be the line's
	// warden (Succession.Warden): it reads the election's Lease when named,
	// and renews its registration every WardenBeat meanwhile, so that the
	// leader sees it alive. A leader names no other candidate warden.
	AnnotationWards = "relect.io/wards"
)

// MaxSuccessors is how many successors a leader names; MaxKeepers how many
// keepers; MaxPassed how many passed-over and cooling candidates a line
// names. More are not read.
const (
	MaxSuccessors = 3
	MaxKeepers    = 1
	MaxPassed     = 8
)

// Succession is the line of succession a leader publishes.
type Succession struct {
	// Term is the leaseTransitions of the record it was written with.
	Term int32 `json:"term"`
	// From is the identity of the leader that published it, and Priority
	// its own Options.Priority, so that followers know it too.
	From     string `json:"from,omitempty"`
	Priority int32  `json:"priority,omitempty"`
	// Next are the successors, first in line first; at most MaxSuccessors.
	Next []Successor `json:"next,omitempty"`
	// Keepers are candidates outside Next that watch the Lease all the
	// same, so that someone notices when the leader and every successor
	// are gone at once, and take their turn after Next; at most MaxKeepers.
	Keepers []string `json:"keep,omitempty"`
	// Warden is a candidate outside Next and Keepers, in a line that is
	// Posted, that follows the line Lease as every outsider does and reads
	// the election's Lease every two retry periods besides, so that someone
	// outside the line notices when the leader, its successors and its
	// keepers are all gone at once; it then watches the election's Lease
	// and takes its turn after the keepers. Empty: none.
	Warden string `json:"ward,omitempty"`
	// Posted says that the leader posts this line to the line Lease
	// (LineName), where the candidates it does not name follow it instead
	// of the election's Lease.
	Posted bool `json:"posted,omitempty"`
	// LineVersion is the resourceVersion of the line Lease as the leader
	// last wrote it (or found it), so that the next leader writes it
	// without reading it first.
	LineVersion string `json:"lv,omitempty"`
	// Passed are candidates the leader leaves out of Next as likely dead,
	// so that the leader after it leaves them out too; at most MaxPassed.
	Passed []string `json:"passed,omitempty"`
	// Streak counts the stuck-work handovers in a row in the fleet: the
	// leader that takes the lease next holds Work.Cooldown × 2^(Streak−1)
	// before it may hand over for stuck work. Zero or absent: none.
	Streak int32 `json:"streak,omitempty"`
	// Cooling are candidates that handed over for stuck work, with the
	// seconds of cooldown left when this was written: the next leaders
	// leave them out of Next meanwhile; at most MaxPassed.
	Cooling []Cooling `json:"cooling,omitempty"`
}

// Successor is one candidate in a Succession.
type Successor struct {
	Identity string `json:"id"`
	Priority int32  `json:"priority,omitempty"`
}

// Cooling is a candidate in its cooldown after a stuck handover.
type Cooling struct {
	Identity string `json:"id"`
	Seconds  int32  `json:"s"`
}

// HandOver is the content of AnnotationHandOver.
type HandOver struct {
	Term int32  `json:"term"` // leaseTransitions of the handover record
	From string `json:"from"` // the leader that handed over
	To   string `json:"to"`   // the holder it named
}

// FenceMark is the content of AnnotationFence.
type FenceMark struct {
	Holder string `json:"holder"`
	Term   int32  `json:"term"`
	Fence  string `json:"fence"`
}

// Request is the content of AnnotationRequest: an operator's request to
// the leader Holder, in its term Term, to step down (To empty: Yield) or
// hand over to To. It is public as operator.Request (an alias), whose doc
// is its users' reference: the one definition of the request.
type Request struct {
	Holder       string    `json:"holder"`
	Term         int32     `json:"term"`
	To           string    `json:"to,omitempty"`
	Unregistered bool      `json:"unregistered,omitempty"`
	By           string    `json:"by,omitempty"`
	At           time.Time `json:"at"`
}

// Holder is l's holder identity ("" if none).
func Holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Transitions is l's leaseTransitions, 0 to MaxInt32.
func Transitions(l *coordinationv1.Lease) int32 {
	if l.Spec.LeaseTransitions == nil {
		return 0
	}
	return min(max(*l.Spec.LeaseTransitions, 0), math.MaxInt32)
}

// Released reports whether l's record is a release: no holder, and the
// lease duration of 1 s that relect and client-go write when they release.
// A holder emptied any other way (by hand) may still be acted on by
// whoever held it, until its next renewal.
func Released(l *coordinationv1.Lease) bool {
	return Holder(l) == "" && l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds == 1
}

// SameTerm reports whether l's leaseTransitions is term.
func SameTerm(l *coordinationv1.Lease, term int32) bool {
	var t int32
	if l.Spec.LeaseTransitions != nil {
		t = *l.Spec.LeaseTransitions
	}
	return t == term
}

// SuccessionOf returns the succession published with l's record, or nil if
// there is none, it is malformed, or it belongs to another term; at most
// MaxSuccessors successors and MaxPassed passed over and cooling are read.
func SuccessionOf(l *coordinationv1.Lease) *Succession {
	raw, ok := l.Annotations[AnnotationSuccession]
	if !ok {
		return nil
	}
	var s Succession
	if json.Unmarshal([]byte(raw), &s) != nil || !SameTerm(l, s.Term) {
		return nil
	}
	// A line longer than any leader writes (edited by hand) would delay
	// everyone outside it by a step per name: only the first are read.
	s.Next = s.Next[:min(len(s.Next), MaxSuccessors)]
	s.Keepers = s.Keepers[:min(len(s.Keepers), MaxKeepers)]
	s.Passed = s.Passed[:min(len(s.Passed), MaxPassed)]
	s.Cooling = s.Cooling[:min(len(s.Cooling), MaxPassed)]
	return &s
}

// HandOverOf returns the handover that l's record is, or nil: a handover
// names the record's holder, from another, and was written with its term.
func HandOverOf(l *coordinationv1.Lease) *HandOver {
	raw, ok := l.Annotations[AnnotationHandOver]
	if !ok {
		return nil
	}
	var h HandOver
	holder := Holder(l)
	if json.Unmarshal([]byte(raw), &h) != nil || !SameTerm(l, h.Term) || h.To == "" || h.To != holder || h.From == holder {
		return nil
	}
	return &h
}

// Rank returns identity's place in s (0: first in line), or -1; -1 for a
// nil s.
func (s *Succession) Rank(identity string) int {
	if s == nil {
		return -1
	}
	for i, c := range s.Next {
		if c.Identity == identity {
			return i
		}
	}
	return -1
}

// KeeperRank returns identity's place among s's keepers (0: the first),
// or -1; -1 for a nil s.
func (s *Succession) KeeperRank(identity string) int {
	if s == nil {
		return -1
	}
	return slices.Index(s.Keepers, identity)
}

// Names reports whether s names identity, as a successor or a keeper:
// those watch the election's Lease. False for a nil s.
func (s *Succession) Names(identity string) bool {
	return s.Rank(identity) >= 0 || s.KeeperRank(identity) >= 0
}

// CooldownOf returns how much cooldown s gives identity, counted from when
// its record was written (or observed); 0 for none, and for a nil s.
func (s *Succession) CooldownOf(identity string) time.Duration {
	if s == nil {
		return 0
	}
	for _, c := range s.Cooling {
		if c.Identity == identity {
			return time.Duration(c.Seconds) * time.Second
		}
	}
	return 0
}

// Encode returns s as an annotation value.
func (s *Succession) Encode() string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

// Encode returns h as an annotation value.
func (h *HandOver) Encode() string {
	raw, _ := json.Marshal(h)
	return string(raw)
}

// FenceOf returns the fence l's annotation gives the term that holds l, or
// "" if it gives none for its current holder and term (a plain client-go
// holder, a release, a handover record, a term only just begun). The
// caller validates it (relect.ParseFence).
func FenceOf(l *coordinationv1.Lease) string {
	var m FenceMark
	raw, ok := l.Annotations[AnnotationFence]
	if !ok || json.Unmarshal([]byte(raw), &m) != nil {
		return ""
	}
	if m.Holder == "" || m.Holder != Holder(l) || m.Term != Transitions(l) || HandOverOf(l) != nil {
		return ""
	}
	return m.Fence
}

// PendingRequest returns the Request written into l that l's current
// holder has yet to honour or refuse: one addressed to that holder and its
// term. ok is false if there is none, or only a stale one.
func PendingRequest(l *coordinationv1.Lease) (r Request, ok bool) {
	raw, found := l.Annotations[AnnotationRequest]
	if !found || json.Unmarshal([]byte(raw), &r) != nil {
		return Request{}, false
	}
	if r.Holder == "" || r.Holder != Holder(l) || r.Term != Transitions(l) || r.To == r.Holder {
		return Request{}, false
	}
	return r, true
}

// SameRequest reports whether a and b are one request (their times to the
// second, as JSON keeps them).
func SameRequest(a, b Request) bool {
	return a.Holder == b.Holder && a.Term == b.Term && a.To == b.To && a.Unregistered == b.Unregistered && a.By == b.By &&
		a.At.Truncate(time.Second).Equal(b.At.Truncate(time.Second))
}

// RegistrationName is the name of identity's registration for the Lease
// named lease: that name (cut to leave room), "-candidate-", and 16 hex
// digits of a hash of the identity.
func RegistrationName(lease, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	suffix := "-candidate-" + hex.EncodeToString(sum[:8])
	if len(lease)+len(suffix) > 253 {
		lease = lease[:253-len(suffix)]
	}
	return strings.TrimRight(lease, ".-") + suffix
}

// CandidateOf is the value of LabelCandidateOf for the Lease named lease.
func CandidateOf(lease string) string {
	if len(lease) <= 63 {
		return lease // a DNS subdomain this short is a valid label value
	}
	sum := sha256.Sum256([]byte(lease))
	return "sha256-" + hex.EncodeToString(sum[:16])
}

// RegistrationSelector selects the registrations of the Lease named lease.
func RegistrationSelector(lease string) string {
	return labels.SelectorFromSet(labels.Set{LabelCandidateOf: CandidateOf(lease)}).String()
}

// Registration is one registration as read from the API.
type Registration struct {
	Identity  string
	Priority  int32
	Standby   bool
	RenewedAt time.Time // by the candidate's own clock
	// Name is the registration's object name; Seconds its lease duration
	// (it lapses that long after its last change was observed); RV its
	// resourceVersion.
	Name    string
	Seconds int
	RV      string
	// ShardWeight is its shard weight (AnnotationShardWeight); 0 if it
	// takes no part in shards.
	ShardWeight int32
	// ShardSet is its AnnotationShardSet (EncodeShardSet); "" if it has
	// none. Instance is its AnnotationInstance: another after a restart.
	ShardSet string
	Instance string
	// Wards is whether it can be the line's warden (AnnotationWards).
	Wards bool
}

// RegistrationOf decodes a registration; ok is false if it is not one (no
// holder: departed).
func RegistrationOf(l *coordinationv1.Lease) (r Registration, ok bool) {
	holder := Holder(l)
	if holder == "" {
		return r, false
	}
	p, _ := strconv.ParseInt(l.Annotations[AnnotationPriority], 10, 32)
	r = Registration{Identity: holder, Priority: int32(p), Standby: l.Annotations[AnnotationStandby] == "true",
		Name: l.Name, RV: l.ResourceVersion, ShardWeight: ShardWeightOf(l),
		ShardSet: l.Annotations[AnnotationShardSet], Instance: l.Annotations[AnnotationInstance],
		Wards: l.Annotations[AnnotationWards] == "true"}
	if l.Spec.RenewTime != nil {
		r.RenewedAt = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		r.Seconds = int(*l.Spec.LeaseDurationSeconds)
	}
	return r, true
}

// The line Lease: where a leader posts its line of succession for the
// candidates it does not name, so that they need not watch the election's
// Lease, whose every renewal would reach them (docs/design.md, "Only the
// line watches"). It is written when the holder or its line changes, and
// every LineRefresh: its holder is the election's leader, its
// leaseTransitions the term, its lease duration twice the refresh, and
// AnnotationSuccession the line, as in the election's Lease (Posted set).
// A line withdrawn (AnnotationLineWithdrawn) tells the candidates that
// follow it to watch the election's Lease again: its holder does not post
// a line (a plain client-go leader, a hand edit).
const (
	// LabelLineOf marks a line Lease with the election's Lease name (as
	// LabelCandidateOf does).
	LabelLineOf = "relect.io/line-of"
	// AnnotationLineWithdrawn is "true" on a withdrawn line.
	AnnotationLineWithdrawn = "relect.io/line-withdrawn"
)

// LineName is the name of the line Lease of the Lease named lease: that
// name (cut to leave room), "-line-", and 8 hex digits of a hash of it,
// so that it is told from another election's Lease named "<lease>-line".
func LineName(lease string) string {
	sum := sha256.Sum256([]byte(lease))
	suffix := "-line-" + hex.EncodeToString(sum[:4])
	if len(lease)+len(suffix) > 253 {
		lease = lease[:253-len(suffix)]
	}
	return strings.TrimRight(lease, ".-") + suffix
}

// Line is a line Lease as read.
type Line struct {
	// Holder and Term are the election's holder and leaseTransitions that
	// the line was posted (or withdrawn) for.
	Holder string
	Term   int32
	// Succession is the line posted; nil when withdrawn.
	Succession *Succession
	// Seconds is how long the line lives without a refresh.
	Seconds int32
}

// Withdrawn reports whether the line was withdrawn (or posted malformed):
// its followers watch the election's Lease again.
func (l Line) Withdrawn() bool { return l.Succession == nil }

// LineOf reads a line Lease. A line whose succession is missing,
// malformed, or of another term than its own reads as withdrawn.
func LineOf(l *coordinationv1.Lease) Line {
	out := Line{Holder: Holder(l), Term: Transitions(l)}
	if l.Spec.LeaseDurationSeconds != nil {
		out.Seconds = *l.Spec.LeaseDurationSeconds
	}
	if l.Annotations[AnnotationLineWithdrawn] != "true" {
		if s := SuccessionOf(l); s != nil && s.Posted {
			out.Succession = s
		}
	}
	return out
}

// SetLine makes l, the line Lease of the Lease named lease, post line (or
// withdraw it, if line.Succession is nil), renewed at now.
func SetLine(l *coordinationv1.Lease, lease string, line Line, now time.Time) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelLineOf] = CandidateOf(lease)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationLease] = lease
	delete(l.Annotations, AnnotationLineWithdrawn)
	delete(l.Annotations, AnnotationSuccession)
	if line.Succession == nil {
		l.Annotations[AnnotationLineWithdrawn] = "true"
	} else {
		l.Annotations[AnnotationSuccession] = line.Succession.Encode()
	}
	holder, term, seconds := line.Holder, line.Term, line.Seconds
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity, l.Spec.LeaseTransitions, l.Spec.LeaseDurationSeconds = &holder, &term, &seconds
	l.Spec.RenewTime = &t
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
}
