package work

import (
	"time"

	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/problem"
)

// Resolve defaults and checks work liveness options o (relect.Options.Work,
// or Options.Shards.Work: field names which, unqualified), if they are on,
// reporting each problem to bad. standby is Options.Standby: a standby has
// no work to watch.
func Resolve(o *Options, field string, standby bool, bad problem.Report) {
	ok := true
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{field + ".BeatWindow", o.BeatWindow}, {field + ".CheckInterval", o.CheckInterval}, {field + ".CheckTimeout", o.CheckTimeout},
		{field + ".Cooldown", o.Cooldown}, {field + ".MaxCooldown", o.MaxCooldown},
	} {
		if d.v < 0 {
			bad(d.field, "is negative (%v)", d.v)
			ok = false
		}
	}
	if o.CheckFailures < 0 {
		bad(field+".CheckFailures", "is negative (%d)", o.CheckFailures)
		ok = false
	}
	if !ok || !o.Enabled() {
		return
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = defaults.WorkCheckInterval
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = o.CheckInterval / 2
	}
	if o.CheckTimeout > o.CheckInterval {
		bad(field+".CheckTimeout", "%v is longer than %s %v: calls of the check would overlap", o.CheckTimeout, problem.Ref(field+".CheckInterval"), o.CheckInterval)
	}
	if o.CheckFailures == 0 {
		o.CheckFailures = defaults.WorkCheckFailures
	}
	if o.Cooldown == 0 {
		o.Cooldown = defaults.WorkCooldown
	}
	if o.MaxCooldown == 0 {
		o.MaxCooldown = max(defaults.WorkMaxCooldown, o.Cooldown)
	}
	if o.MaxCooldown < o.Cooldown {
		bad(field+".MaxCooldown", "%v is less than %s %v", o.MaxCooldown, problem.Ref(field+".Cooldown"), o.Cooldown)
	}
	if standby && field == "Work" {
		bad("Work", "is set, but %s is too: a standby never leads, so it has no work to watch", problem.Ref("Standby"))
	}
}
