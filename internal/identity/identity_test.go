package identity

import (
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/problem"
)

func TestDefault(t *testing.T) {
	a, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^` + regexp.QuoteMeta(host()) + `_[0-9a-f]{16}$`)
	if len(host())+17 > MaxLen {
		want = regexp.MustCompile(`_[0-9a-f]{16}$`)
	}
	if !want.MatchString(a) || !want.MatchString(b) || a == b || len(a) > MaxLen {
		t.Errorf("Default() = %q, %q: want two different matches of %v, at most %d bytes", a, b, want, MaxLen)
	}
	if got, want := DefaultLen(func(s string) int { return len(s) }), min(MaxLen, len(a)); got != want {
		t.Errorf("DefaultLen = %d, want %d (the length of %q)", got, want, a)
	}
	if got := DefaultLen(func(string) int { return 1000 }); got != MaxLen {
		t.Errorf("DefaultLen of a 1000-byte host = %d, want %d", got, MaxLen)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want []string
	}{
		{"pod-1", nil},
		{"ünïcode", nil},
		{"\xff", []string{`Identity: "\xff" is not valid UTF-8: the API server would store it altered, and this candidate would not recognise the lease it holds`}},
		{leaserecord.EmptiedHolder, []string{fmt.Sprintf("Identity: %q is reserved: relect shows it to client-go in place of a holder that is not this candidate", leaserecord.EmptiedHolder)}},
		{"a" + leaserecord.StrangerSuffix, []string{fmt.Sprintf("Identity: %q is reserved: relect shows it to client-go in place of a holder that is not this candidate", "a"+leaserecord.StrangerSuffix)}},
	} {
		var got []string
		Check("Identity", tc.id, func(field, format string, args ...any) {
			for _, a := range args {
				if _, ok := a.(problem.Ref); ok {
					t.Errorf("%q: a Ref in a report of one field", tc.id)
				}
			}
			got = append(got, field+": "+fmt.Sprintf(format, args...))
		})
		if !slices.Equal(got, tc.want) {
			t.Errorf("Check(%q) reported %q, want %q", tc.id, got, tc.want)
		}
	}
}
