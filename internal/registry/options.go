package registry

import (
	"math"
	"time"

	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/problem"
)

// Lives is how many renewal periods a registration stays live after its
// last renewal was observed: its leaseDurationSeconds is
// Lives × Options.RegistrationRenewal.
const Lives = 3

// Settings are what CheckOptions reads of relect.Options. Renewal is
// Options.RegistrationRenewal, which CheckOptions defaults in place.
type Settings struct {
	Renewal *time.Duration
	// LeaseDuration is Options.LeaseDuration, valid if DurationsOK.
	LeaseDuration time.Duration
	DurationsOK   bool
	// Priority is Options.Priority; DisableRegistry is
	// Options.DisableRegistry; Lock is Options.Lock set.
	Priority              int32
	DisableRegistry, Lock bool
}

// CheckOptions defaults and checks the registry's options, as s gives
// them, reporting each problem to bad: RegistrationRenewal, then Priority.
func CheckOptions(s Settings, bad problem.Report) {
	switch r := *s.Renewal; {
	case r < 0:
		bad("RegistrationRenewal", "is negative (%v)", r)
	case r/time.Second*Lives > math.MaxInt32:
		bad("RegistrationRenewal", "%v is too long for a registration's 32-bit leaseDurationSeconds", r)
	case r == 0:
		*s.Renewal = defaults.RegistrationRenewal
	case s.DurationsOK && r < s.LeaseDuration:
		bad("RegistrationRenewal", "%v is shorter than %s %v", r, problem.Ref("LeaseDuration"), s.LeaseDuration)
	}
	// A priority orders the registered candidates only; without a
	// registration nobody would know it.
	switch {
	case s.Priority == 0:
	case s.DisableRegistry:
		bad("Priority", "is %d, but %s is set: a priority orders the registered candidates only", s.Priority, problem.Ref("DisableRegistry"))
	case s.Lock:
		bad("Priority", "is %d, but with a %s the candidate registry is off: a priority orders the registered candidates only", s.Priority, problem.Ref("Lock"))
	}
}
