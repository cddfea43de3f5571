package fencing_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/relect/relect"
	"github.com/relect/relect/fencing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const fenceKey = "example.com/fence"

// configMaps is a strict ObjectClient of ConfigMaps with the apiserver's
// resourceVersion rules: every write gets the next version, and an Update
// whose version is not the stored one is a 409 Conflict. beforeUpdate, if
// set, runs before each Update is applied (another writer's turn).
type configMaps struct {
	t            *testing.T
	rv           int
	objs         map[string]*corev1.ConfigMap
	gets, writes int
	beforeUpdate func()
}

func newConfigMaps(t *testing.T, names ...string) *configMaps {
	c := &configMaps{t: t, objs: map[string]*corev1.ConfigMap{}}
	for _, n := range names {
		c.rv++
		c.objs[n] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, ResourceVersion: strconv.Itoa(c.rv)}}
	}
	return c
}

var gr = schema.GroupResource{Resource: "configmaps"}

func (c *configMaps) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	c.gets++
	cm, ok := c.objs[name]
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	return cm.DeepCopy(), nil
}

func (c *configMaps) Update(_ context.Context, cm *corev1.ConfigMap, _ metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	if f := c.beforeUpdate; f != nil {
		c.beforeUpdate = nil
		f()
	}
	stored, ok := c.objs[cm.Name]
	switch {
	case !ok:
		return nil, apierrors.NewNotFound(gr, cm.Name)
	case cm.ResourceVersion != stored.ResourceVersion:
		return nil, apierrors.NewConflict(gr, cm.Name, errors.New("the object has been modified"))
	}
	c.writes++
	c.rv++
	cm = cm.DeepCopy()
	cm.ResourceVersion = strconv.Itoa(c.rv)
	c.objs[cm.Name] = cm
	return cm.DeepCopy(), nil
}

// set writes cm's data["v"] = v and the fence annotation, as another writer
// would (through Update, so that versions move).
func (c *configMaps) set(name string, f relect.Fence, v string) {
	cm := c.objs[name].DeepCopy()
	cm.Annotations = map[string]string{fenceKey: string(f)}
	cm.Data = map[string]string{"v": v}
	_, err := c.Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(c.t, err)
}

func put(v string) func(*corev1.ConfigMap) error {
	return func(cm *corev1.ConfigMap) error {
		cm.Data = map[string]string{"v": v}
		return nil
	}
}

func TestUpdateObject(t *testing.T) {
	ctx := t.Context()
	c := newConfigMaps(t, "report")
	cm, err := fencing.UpdateObject(ctx, c, "report", fenceKey, "41", put("a"))
	require.NoError(t, err)
	assert.Equal(t, "41", cm.Annotations[fenceKey])
	assert.Equal(t, "a", c.objs["report"].Data["v"])

	_, err = fencing.UpdateObject(ctx, c, "report", fenceKey, "41", put("b"))
	require.NoError(t, err, "the same term writes again")
	_, err = fencing.UpdateObject(ctx, c, "report", fenceKey, "100", put("c"))
	require.NoError(t, err, "a newer term: compared as integers, not text")

	writes := c.writes
	_, err = fencing.UpdateObject(ctx, c, "report", fenceKey, "99", put("late"))
	assert.ErrorIs(t, err, fencing.ErrStale)
	assert.ErrorContains(t, err, "99 is older than 100")
	assert.Equal(t, writes, c.writes, "a stale write writes nothing")
	assert.Equal(t, "c", c.objs["report"].Data["v"])
	assert.Equal(t, "100", c.objs["report"].Annotations[fenceKey])
}

// A write of another term between the read and the update: the apiserver
// refuses the update (409), and UpdateObject checks again on a fresh read.
func TestUpdateObjectConflict(t *testing.T) {
	for _, c := range []struct {
		name    string
		between relect.Fence
		stale   bool
	}{
		{"a newer term wrote in between: refused", "60", true},
		{"an older term wrote in between: written over", "40", false},
		{"the same term wrote in between: written over", "50", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cms := newConfigMaps(t, "report")
			cms.beforeUpdate = func() { cms.set("report", c.between, "between") }
			calls := 0
			_, err := fencing.UpdateObject(t.Context(), cms, "report", fenceKey, "50", func(cm *corev1.ConfigMap) error {
				calls++
				return put("mine")(cm)
			})
			assert.Equal(t, 2, cms.gets, "read again after the conflict")
			if c.stale {
				assert.ErrorIs(t, err, fencing.ErrStale)
				assert.Equal(t, 1, calls, "change is not called for a refused write")
				assert.Equal(t, "between", cms.objs["report"].Data["v"])
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 2, calls)
			assert.Equal(t, "mine", cms.objs["report"].Data["v"])
			assert.Equal(t, "50", cms.objs["report"].Annotations[fenceKey])
		})
	}
}

func TestUpdateObjectRefuses(t *testing.T) {
	ctx := t.Context()
	c := newConfigMaps(t, "report")
	for _, bad := range []relect.Fence{"", "garbage", "0100", "-1"} {
		_, err := fencing.UpdateObject(ctx, c, "report", fenceKey, bad, put("x"))
		assert.ErrorIs(t, err, fencing.ErrNoFence, "%q", bad)
		if bad != "" {
			assert.ErrorIs(t, err, relect.ErrInvalidFence, "%q", bad)
		}
	}
	for _, key := range []string{"", "a/b/c", "example.com/", "-fence"} {
		_, err := fencing.UpdateObject(ctx, c, "report", key, "7", put("x"))
		assert.ErrorContains(t, err, "annotation key", "%q", key)
	}
	assert.Zero(t, c.gets, "bad input is refused before any request")

	boom := errors.New("boom")
	_, err := fencing.UpdateObject(ctx, c, "report", fenceKey, "7", func(*corev1.ConfigMap) error { return boom })
	assert.Same(t, boom, err)
	assert.Zero(t, c.writes)

	_, err = fencing.UpdateObject(ctx, c, "absent", fenceKey, "7", put("x"))
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	ctx, cancel := context.WithCancel(ctx)
	c.beforeUpdate = func() { c.set("report", "1", "between"); cancel() }
	_, err = fencing.UpdateObject(ctx, c, "report", fenceKey, "7", put("x"))
	assert.ErrorIs(t, err, context.Canceled, "a conflict after ctx is done ends the loop")
}

// A fence garbled by hand is older than every fence: it never blocks a
// term's write.
func TestUpdateObjectOverGarbage(t *testing.T) {
	c := newConfigMaps(t, "report")
	c.set("report", "not-a-fence", "old")
	_, err := fencing.UpdateObject(t.Context(), c, "report", fenceKey, "3", put("new"))
	require.NoError(t, err)
	assert.Equal(t, "3", c.objs["report"].Annotations[fenceKey])
}

// Writers that keep racing for one object: every update meets a 409.
// UpdateObject gives up after client-go's retry.DefaultRetry (5 attempts),
// returning the conflict, instead of reading and writing without end.
func TestUpdateObjectConflictStorm(t *testing.T) {
	cms := newConfigMaps(t, "report")
	var storm func()
	storm = func() { cms.set("report", "40", "other"); cms.beforeUpdate = storm }
	cms.beforeUpdate = storm
	_, err := fencing.UpdateObject(t.Context(), cms, "report", fenceKey, "50", put("mine"))
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	assert.Equal(t, 5, cms.gets, "one read per attempt, 5 attempts")
	assert.Equal(t, 5, cms.writes, "the other writer's 5 writes, none of UpdateObject's")
	assert.Equal(t, "other", cms.objs["report"].Data["v"])
}
