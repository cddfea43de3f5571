package registry

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/problem"
)

func TestCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings // Renewal set from renewal
		in   time.Duration
		out  time.Duration
		want []string
	}{
		{"defaults", Settings{LeaseDuration: 15 * time.Second, DurationsOK: true}, 0, defaults.RegistrationRenewal, nil},
		{"negative", Settings{}, -time.Second, -time.Second, []string{"RegistrationRenewal: is negative (-1s)"}},
		{"too long", Settings{}, (1<<31)/Lives*time.Second + time.Second, (1<<31)/Lives*time.Second + time.Second,
			[]string{fmt.Sprintf("RegistrationRenewal: %v is too long for a registration's 32-bit leaseDurationSeconds", (1<<31)/Lives*time.Second+time.Second)}},
		{"shorter than the lease", Settings{LeaseDuration: 15 * time.Second, DurationsOK: true}, 10 * time.Second, 10 * time.Second,
			[]string{"RegistrationRenewal: 10s is shorter than [LeaseDuration] 15s"}},
		{"shorter than an invalid lease", Settings{LeaseDuration: 15 * time.Second}, 10 * time.Second, 10 * time.Second, nil},
		{"priority, no registry", Settings{Priority: 2, DisableRegistry: true, Lock: true}, time.Minute, time.Minute,
			[]string{"Priority: is 2, but [DisableRegistry] is set: a priority orders the registered candidates only"}},
		{"priority, a lock", Settings{Priority: -1, Lock: true}, time.Minute, time.Minute,
			[]string{"Priority: is -1, but with a [Lock] the candidate registry is off: a priority orders the registered candidates only"}},
		{"priority", Settings{Priority: 5}, time.Minute, time.Minute, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			renewal := tc.in
			tc.s.Renewal = &renewal
			var got []string
			CheckOptions(tc.s, func(field, format string, args ...any) {
				args = slices.Clone(args)
				for i, a := range args {
					if r, ok := a.(problem.Ref); ok {
						args[i] = "[" + string(r) + "]"
					}
				}
				got = append(got, field+": "+fmt.Sprintf(format, args...))
			})
			if !slices.Equal(got, tc.want) || renewal != tc.out {
				t.Errorf("problems %q, RegistrationRenewal %v\nwant %q, %v", got, renewal, tc.want, tc.out)
			}
		})
	}
}
