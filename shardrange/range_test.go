package shardrange_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/relect/relect/shardrange"
)

// twoTo64 is 2^64, the end of the hash space.
var twoTo64 = new(big.Int).Lsh(big.NewInt(1), 64)

// bigStart is shard i of count's start by the rule the docs state,
// i·2^64/count rounded down, in big integers (not Of's arithmetic).
func bigStart(i, count int) *big.Int {
	n := new(big.Int).Mul(big.NewInt(int64(i)), twoTo64)
	return n.Div(n, big.NewInt(int64(count)))
}

// TestOfCoversTheSpace: for each count, the ranges start at 0, end at
// 2^64 − 1, follow each other without a gap or an overlap, and each is
// [i·2^64/count, (i+1)·2^64/count) exactly.
func TestOfCoversTheSpace(t *testing.T) {
	for _, count := range []int{1, 2, 3, 7, 8, 32, 1000} {
		rs, err := shardrange.Split(shardrange.UID, count)
		require.NoError(t, err)
		require.Len(t, rs, count)
		assert.Zero(t, rs[0].Start(), "count %d: the first range starts at 0", count)
		assert.Equal(t, uint64(math.MaxUint64), rs[count-1].Last(), "count %d: the last range ends at 2^64 − 1", count)
		for i, r := range rs {
			end := new(big.Int).Sub(bigStart(i+1, count), big.NewInt(1))
			assert.Equal(t, bigStart(i, count).Uint64(), r.Start(), "count %d, range %d's start", count, i)
			assert.Equal(t, end.Uint64(), r.Last(), "count %d, range %d's last hash", count, i)
			if i > 0 {
				assert.Equal(t, rs[i-1].Last()+1, r.Start(), "count %d: range %d follows %d", count, i, i-1)
			}
			assert.Equal(t, shardrange.UID, r.Field())
		}
	}
}

func TestOfRefuses(t *testing.T) {
	for _, c := range []struct {
		f        shardrange.Field
		i, count int
	}{{"", 0, 1}, {"name", 0, 1}, {shardrange.UID, 0, 0}, {shardrange.UID, -1, 4}, {shardrange.UID, 4, 4}} {
		_, err := shardrange.Of(c.f, c.i, c.count)
		assert.ErrorIs(t, err, shardrange.ErrInvalid, "%+v", c)
	}
	_, err := shardrange.Split(shardrange.Namespace, 0)
	assert.ErrorIs(t, err, shardrange.ErrInvalid)
}

// TestSelector: the strings are those of metav1.ListOptions.ShardSelector's
// own examples (its 2- and 4-shard splits), and S = 1 is the whole space.
func TestSelector(t *testing.T) {
	sel := func(f shardrange.Field, i, count int) string {
		r, err := shardrange.Of(f, i, count)
		require.NoError(t, err)
		return r.Selector()
	}
	assert.Equal(t, "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')", sel(shardrange.UID, 0, 1))
	assert.Equal(t, "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')", sel(shardrange.UID, 0, 2))
	assert.Equal(t, "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')", sel(shardrange.UID, 1, 2))
	assert.Equal(t, "shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')", sel(shardrange.UID, 1, 4))
	assert.Equal(t, "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')", sel(shardrange.UID, 3, 4))
	assert.Equal(t, "shardRange(object.metadata.namespace, '0x5555555555555555', '0xaaaaaaaaaaaaaaaa')", sel(shardrange.Namespace, 1, 3))
	assert.Empty(t, shardrange.Range{}.Selector(), "the zero Range asks for no filter")

	var o metav1.ListOptions
	r, _ := shardrange.Of(shardrange.UID, 1, 4)
	r.Tweak(&o)
	assert.Equal(t, r.Selector(), o.ShardSelector)
}

// TestParseRoundTrip: Parse reads back every Selector (both fields, the
// first and last ranges, S = 1), and refuses what the apiserver's parser
// refuses of one range.
func TestParseRoundTrip(t *testing.T) {
	for _, f := range []shardrange.Field{shardrange.UID, shardrange.Namespace} {
		for _, count := range []int{1, 2, 3, 8, 1000} {
			rs, _ := shardrange.Split(f, count)
			for _, r := range rs {
				got, err := shardrange.Parse(r.Selector())
				require.NoError(t, err, r.Selector())
				assert.Equal(t, r, got, r.Selector())
			}
		}
	}
	got, err := shardrange.Parse("shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')")
	require.NoError(t, err, "spaces are optional")
	assert.Equal(t, uint64(1)<<63-1, got.Last())
	zero, err := shardrange.Parse("")
	require.NoError(t, err)
	assert.Equal(t, shardrange.Range{}, zero)
	for _, s := range []string{
		"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')", // 16 digits, as the apiserver wants
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
		"shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
		"shardRange(object.metadata.uid, '0x9000000000000000', '0x8000000000000000')",
		"shardRange(object.metadata.uid, '0xABCDEF0000000000', '0xffffffffffffffff')",
		"shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
		"shardRange(object.metadata.uid, '0x0000000000000000')",
		"shardRange(object.metadata.uid, 0x0000000000000000, '0x8000000000000000')",
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
	} {
		_, err := shardrange.Parse(s)
		assert.ErrorIs(t, err, shardrange.ErrInvalid, s)
	}
}

// fnv64a is the hash the KEP names, computed here with the standard
// library rather than through apimachinery.
func fnv64a(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func configMap(uid, namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + uid, Namespace: namespace, UID: types.UID(uid)}}
}

// TestMatchesPartitions: apimachinery's matcher puts each of 10,000
// objects in exactly the range that contains the FNV-1a hash of its uid
// (or namespace), so 8 ranges partition them; the counts per range are
// logged.
func TestMatchesPartitions(t *testing.T) {
	for _, f := range []shardrange.Field{shardrange.UID, shardrange.Namespace} {
		rs, _ := shardrange.Split(f, 8)
		counts := make([]int, len(rs))
		for n := range 10000 {
			uid, namespace := fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n*7919), fmt.Sprintf("ns-%d", n%97)
			value := uid
			if f == shardrange.Namespace {
				value = namespace
			}
			in := 0
			for i, r := range rs {
				m, err := r.Matches(configMap(uid, namespace))
				require.NoError(t, err)
				assert.Equal(t, r.Contains(fnv64a(value)), m, "%s %s in range %d", f, value, i)
				if m {
					in++
					counts[i]++
				}
			}
			require.Equal(t, 1, in, "%s %s is in exactly one range", f, value)
		}
		t.Logf("%s: objects per range of 8: %v", f, counts)
	}
	m, err := shardrange.Range{}.Matches(configMap("x", ""))
	require.NoError(t, err)
	assert.True(t, m, "the zero Range matches everything")
}

func TestContext(t *testing.T) {
	_, ok := shardrange.FromContext(t.Context())
	assert.False(t, ok)
	r, _ := shardrange.Of(shardrange.Namespace, 2, 5)
	got, ok := shardrange.FromContext(shardrange.NewContext(context.Background(), r))
	assert.True(t, ok)
	assert.Equal(t, r, got)
}
