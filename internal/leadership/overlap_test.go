package leadership

import (
	"slices"
	"testing"
)

type span = Span[string, int64]

func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spans    []span
		halfOpen []Overlap[int64]
		closed   []Overlap[int64]
	}{
		{"disjoint", []span{{"a", 0, 10}, {"b", 11, 20}}, nil, nil},
		{"handover at one instant: touching",
			[]span{{"a", 0, 10}, {"b", 10, 20}},
			nil, []Overlap[int64]{{A: 0, B: 1, From: 10, To: 10}}},
		{"shared length of time",
			[]span{{"b", 9, 20}, {"a", 0, 10}},
			[]Overlap[int64]{{A: 1, B: 0, From: 9, To: 10}}, []Overlap[int64]{{A: 1, B: 0, From: 9, To: 10}}},
		{"one holder's spans never overlap each other", []span{{"a", 0, 10}, {"a", 5, 20}}, nil, nil},
		{"an instant inside another's span",
			[]span{{"a", 0, 10}, {"b", 5, 5}},
			nil, []Overlap[int64]{{A: 0, B: 1, From: 5, To: 5}}},
		{"contained: the shared time ends with the inner span",
			[]span{{"a", 0, 100}, {"b", 10, 20}, {"c", 30, 40}},
			[]Overlap[int64]{{A: 0, B: 1, From: 10, To: 20}, {A: 0, B: 2, From: 30, To: 40}},
			[]Overlap[int64]{{A: 0, B: 1, From: 10, To: 20}, {A: 0, B: 2, From: 30, To: 40}}},
		{"three at once: every pair",
			[]span{{"a", 0, 10}, {"b", 1, 10}, {"c", 2, 10}},
			[]Overlap[int64]{{A: 0, B: 1, From: 1, To: 10}, {A: 0, B: 2, From: 2, To: 10}, {A: 1, B: 2, From: 2, To: 10}},
			[]Overlap[int64]{{A: 0, B: 1, From: 1, To: 10}, {A: 0, B: 2, From: 2, To: 10}, {A: 1, B: 2, From: 2, To: 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Overlaps(tc.spans, HalfOpen); !slices.Equal(got, tc.halfOpen) {
				t.Errorf("half-open: got %v, want %v", got, tc.halfOpen)
			}
			if got := Overlaps(tc.spans, Closed); !slices.Equal(got, tc.closed) {
				t.Errorf("closed: got %v, want %v", got, tc.closed)
			}
		})
	}
}
