package problem

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReports(t *testing.T) {
	var r Reports
	r.Bad("Shards.Count", "is %d and %s is set", 3, Ref("Shards.Names"))
	assert.Equal(t, Reports{"Shards.Count: is 3 and [Shards.Names] is set"}, r)
}
