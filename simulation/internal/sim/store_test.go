package sim

import (
	"slices"
	"testing"
)

func TestRegister(t *testing.T) {
	for _, tc := range []struct {
		store  Store
		tokens []string
		want   []bool
	}{
		{StoreFence, []string{"100", "100", "250", "99", "1000", "250"}, []bool{true, true, true, false, true, false}},
		{StoreFence, []string{"", "5", ""}, []bool{true, true, false}}, // no fence: older than any
		{StoreTerm, []string{"3", "3", "10", "9", "0"}, []bool{true, true, true, false, false}},
		{StorePlain, []string{"", "", ""}, []bool{true, true, true}},
	} {
		g := &register{store: tc.store}
		var got []bool
		for i, tok := range tc.tokens {
			ok, order := g.write(tok)
			if order != i {
				t.Errorf("%s: write %d has order %d", tc.store, i, order)
			}
			got = append(got, ok)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: accepted %v, want %v", tc.store, tc.tokens, got, tc.want)
		}
	}
}
