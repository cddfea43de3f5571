package leadership

import (
	"slices"
	"testing"
)

func TestTermRegressions(t *testing.T) {
	type term = Term[string, int64]
	for _, tc := range []struct {
		name  string
		terms []term
		want  []Regression
	}{
		{"growing", []term{{"a", 0, 0}, {"b", 1, 20}, {"a", 2, 40}}, nil},
		{"same holder keeps its number", []term{{"a", 4, 0}, {"a", 4, 20}}, nil},
		{"new holder reuses the number", []term{{"a", 4, 0}, {"b", 4, 20}}, []Regression{{Prev: 0, Cur: 1, NewHolder: true}}},
		{"number goes back", []term{{"a", 4, 0}, {"a", 3, 20}}, []Regression{{Prev: 0, Cur: 1}}},
		{"unknown numbers skipped", []term{{"a", 4, 0}, {"c", -1, 10}, {"b", 5, 20}}, nil},
		{"compared with the last known number", []term{{"a", 4, 0}, {"a", -1, 10}, {"a", 3, 20}}, []Regression{{Prev: 0, Cur: 2}}},
		{"in order of the instant, not as given", []term{{"b", 5, 20}, {"a", 4, 0}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TermRegressions(tc.terms); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
