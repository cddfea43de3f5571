package bench

import (
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The reports' medians and p99s are nearest-rank: with an even count the
// lower middle value, with fewer than 100 values p99 is the maximum.
func TestQuantile(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	med, ok := Quantile(xs, 0.5)
	require.True(t, ok)
	assert.Equal(t, 2.0, med)
	p99, _ := Quantile(xs, 0.99)
	assert.Equal(t, 4.0, p99)
	assert.Equal(t, []float64{4, 1, 3, 2}, xs, "the samples are left as they were")
	_, ok = Quantile([]time.Duration(nil), 0.5)
	assert.False(t, ok)

	assert.Equal(t, "2.5 ± 0.6", MeanSEOf(xs).String())
	assert.Equal(t, "3.0", MeanSEOf([]float64{3}).String(), "one sample: no error")
	assert.True(t, math.IsNaN(Mean(nil)))
}

// Next returns the earliest term begun from the given instant on by
// another candidate than the one named, waiting for it in simulated time,
// and says so when none comes within the limit.
func TestTermsNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Terms[string]
		t0 := time.Now()
		l.Started("a", t0)
		go func() {
			time.Sleep(3 * time.Second)
			l.Stopped("a", time.Now())
			l.Started("a", time.Now()) // the old leader again: skipped
			time.Sleep(time.Second)
			l.Started("b", time.Now())
			time.Sleep(time.Second)
			l.Started("c", time.Now())
		}()
		m, err := l.Next(t0.Add(time.Second), "a", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, Mark[string]{Who: "b", At: t0.Add(4 * time.Second), Start: true}, m)
		assert.LessOrEqual(t, time.Since(t0), 4*time.Second+time.Millisecond, "it returns within a Poll of the term's start")
		time.Sleep(2 * time.Second)
		last, _ := l.Latest()
		assert.Equal(t, "c", last.Who)
		assert.Equal(t, t0.Add(3*time.Second), l.LastStop("a"))

		_, err = l.Next(time.Now().Add(time.Second), "", 10*time.Second)
		assert.EqualError(t, err, "no new term within 10s")
	})
}

// The axes: steps of 1, 2 or 5 times a power of ten, a linear scale from
// zero past the top, a logarithmic one by decades.
func TestScales(t *testing.T) {
	assert.Equal(t, []float64{1, 2, 5, 10, 0.2, 1}, []float64{NiceStep(1), NiceStep(1.5), NiceStep(3), NiceStep(7), NiceStep(0.15), NiceStep(0)})
	lin := Linear(9, 1.2) // step 2, to 12
	assert.Equal(t, []float64{0, 2, 4, 6, 8, 10, 12}, lin.Ticks)
	assert.Equal(t, 0.5, lin.Frac(6))
	assert.Equal(t, 0.0, lin.Frac(-1))
	lg := Log(641)
	assert.Equal(t, []float64{1, 10, 100, 1000}, lg.Ticks)
	assert.InDelta(t, 2.0/3, lg.Frac(100), 1e-12)
	assert.Equal(t, []float64{1, 10}, Log(1).Ticks, "a top of 1 still has a decade")
}

// A table's names align left, its figures right.
func TestHeader(t *testing.T) {
	var b strings.Builder
	Header(&b, []string{"N", "change", "calls"}, 2)
	Row(&b, "2", "graceful", "5 / 5")
	assert.Equal(t, "| N | change | calls |\n| --- | --- | ---: |\n| 2 | graceful | 5 / 5 |\n", b.String())
}
