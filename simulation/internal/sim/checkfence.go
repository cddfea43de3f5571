package sim

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// What the checkers make of the leaders' writes to the stores (store.go,
// wire.go): the fencing property, by the ground truth of the terms' order
// (LateWrites), and linearizability against a fenced register, by
// porcupine (CheckLinearizable).

// LateWrite is a write that a store accepted from an older term after a
// write from a newer term had reached it (accepted, or refused as a store
// guarded by term numbers refuses the new leader's after the Lease was
// created again): what a fencing token exists to prevent. Terms are
// ordered by when their contexts began (History.Terms' order), which is
// the order of their acquisitions of the Lease when no two overlap (the
// safety checkers see to that) — not by the token, which is what is being
// checked.
type LateWrite struct {
	Write Write
	// Newer is the newest term whose write had reached the store before.
	Newer int
}

// LateWrites returns store's late writes in h, in the order the store
// received them, and how many writes it refused although no newer term's
// write had reached it (the newest leader's, refused: zero for a guard
// whose tokens grow with the terms).
func LateWrites(h *History, store Store) (late []LateWrite, refusedNewest int) {
	var reached []Write
	for _, w := range h.Writes {
		if w.Store == store && w.Order >= 0 {
			reached = append(reached, w)
		}
	}
	slices.SortFunc(reached, func(a, b Write) int { return a.Order - b.Order })
	newest := -1
	for _, w := range reached {
		switch {
		case w.Term < newest && w.Accepted:
			late = append(late, LateWrite{Write: w, Newer: newest})
		case w.Term >= newest && !w.Accepted:
			refusedNewest++
		}
		newest = max(newest, w.Term)
	}
	return late, refusedNewest
}

// checkFence: the store guarded by relect's fence never applies a write
// from an older term after one from a newer term (fence-late-write).
func checkFence(h *History) []Violation {
	var out []Violation
	late, _ := LateWrites(h, StoreFence)
	for _, l := range late {
		w, newer := l.Write, h.Terms[l.Newer]
		out = append(out, Violation{Class: Safety, Rule: "fence-late-write", At: w.Applied,
			Candidates: []int{w.Candidate, newer.Candidate},
			Detail: fmt.Sprintf("the fenced store accepted a write of term %d (fence %s, sent %s) after one of the newer term %d reached it",
				h.Terms[w.Term].Number, w.Token, fmtDur(w.Sent), newer.Number)})
	}
	return out
}

// LinearizabilityTimeout bounds each porcupine check (real time): a check
// that does not finish within it is reported as unknown.
const LinearizabilityTimeout = 5 * time.Second

// The results of a porcupine check (Linearizability.Result).
const (
	Linearizable    = "linearizable"
	NotLinearizable = "not linearizable"
	LinUnknown      = "unknown" // the check timed out
)

// Linearizability is porcupine's verdict on one store's history.
type Linearizability struct {
	Store  Store
	Result string // Linearizable, NotLinearizable or LinUnknown
	model  porcupine.Model
	info   porcupine.LinearizationInfo
}

// Visualize writes porcupine's visualization of the history (an HTML
// file) to path.
func (l Linearizability) Visualize(path string) error {
	return porcupine.VisualizePath(l.model, l.info, path)
}

// storeOp is the input of an operation on a store: a write with token, or
// the final read.
type storeOp struct {
	read  bool
	token string
}

// storeOut is the output: of a write, whether the writer learnt the
// outcome (known) and whether it was accepted; of the read, the highest
// token.
type storeOut struct {
	known, accepted bool
	highest         string
}

// registerModel is the fenced register of store s, as porcupine checks it:
// its state is the highest token it has accepted; a write is accepted if
// its token is at least that, else refused; a write whose outcome the
// writer never learnt (maybe applied, as etcd's robustness tests model a
// lost answer) may have been applied or not — it may have been lost — so
// the model is nondeterministic.
func registerModel(s Store) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{""} },
		Step: func(state, input, output any) []any {
			st, op, out := state.(string), input.(storeOp), output.(storeOut)
			if op.read {
				if out.highest == st {
					return []any{st}
				}
				return nil
			}
			allowed := compareTokens(s, op.token, st) >= 0
			switch {
			case !out.known && allowed:
				return []any{st, op.token}
			case !out.known:
				return []any{st}
			case out.accepted && allowed:
				return []any{op.token}
			case !out.accepted && !allowed:
				return []any{st}
			}
			return nil
		},
		Hash: func(state any) uint64 {
			f := fnv.New64a()
			f.Write([]byte(state.(string)))
			return f.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			op, out := input.(storeOp), output.(storeOut)
			if op.read {
				return fmt.Sprintf("read → %q", out.highest)
			}
			res := "maybe applied"
			switch {
			case out.known && out.accepted:
				res = "accepted"
			case out.known:
				res = "refused"
			}
			return fmt.Sprintf("write(%q) → %s", op.token, res)
		},
		DescribeState: func(state any) string { return fmt.Sprintf("highest %q", state.(string)) },
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return info.(string)
		},
	}
	return nm.ToModel()
}

// storeOperations is store's history in h as porcupine operations: each
// write from when it was sent to when its writer learnt the outcome — or,
// maybe applied, to FinalAt, by which the network has delivered or lost
// every write — and the read of the store's content after FinalAt. Client
// ids are candidates; the read's is h.Candidates.
func storeOperations(h *History, store Store) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, w := range h.Writes {
		if w.Store != store {
			continue
		}
		ret, out := int64(h.FinalAt), storeOut{}
		if w.Answered >= 0 {
			ret, out = int64(w.Answered), storeOut{known: true, accepted: w.Accepted}
		}
		ops = append(ops, porcupine.Operation{ClientId: w.Candidate, Input: storeOp{token: w.Token}, Call: int64(w.Sent),
			Output: out, Return: ret,
			Metadata: fmt.Sprintf("%s term %d, sent %s, applied %s", CandidateName(w.Candidate), h.Terms[w.Term].Number,
				fmtDur(w.Sent), fmtDur(w.Applied))})
	}
	at := int64(h.FinalAt) + 1
	return append(ops, porcupine.Operation{ClientId: h.Candidates, Input: storeOp{read: true}, Call: at,
		Output: storeOut{highest: h.Final[store]}, Return: at, Metadata: "the final read"})
}

// CheckLinearizable checks store's history in h against the fenced register
// (registerModel) with porcupine, for at most timeout of real time. It
// must not be called inside a synctest bubble, whose clock would never
// end the check.
func CheckLinearizable(h *History, store Store, timeout time.Duration) Linearizability {
	m := registerModel(store)
	res, info := porcupine.CheckOperationsVerbose(m, storeOperations(h, store), timeout)
	l := Linearizability{Store: store, model: m, info: info, Result: LinUnknown}
	switch res {
	case porcupine.Ok:
		l.Result = Linearizable
	case porcupine.Illegal:
		l.Result = NotLinearizable
	}
	return l
}

// Stores returns the stores h's leaders wrote to, in report order.
func Stores(h *History) []Store {
	var out []Store
	for _, s := range []Store{StoreFence, StoreTerm, StorePlain} {
		if _, ok := h.Final[s]; ok {
			out = append(out, s)
		}
	}
	return out
}
