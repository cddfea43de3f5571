package problem

import (
	"io"
	"testing"
)

type closer struct{}

func (*closer) Close() error { return nil }

func TestNilInside(t *testing.T) {
	var nilCloser *closer
	var nilFunc func()
	var nilMap map[string]int
	var nilChan chan int
	var nilSlice []int
	var nilIface io.Closer
	for _, tc := range []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, false},
		{"a nil interface value", nilIface, false},
		{"a nil pointer", nilCloser, true},
		{"a nil pointer as io.Closer", io.Closer(nilCloser), true},
		{"a nil func", nilFunc, true},
		{"a nil map", nilMap, true},
		{"a nil chan", nilChan, true},
		{"a nil slice", nilSlice, true},
		{"a pointer", &closer{}, false},
		{"an int", 0, false},
		{"a string", "", false},
		{"a struct", struct{}{}, false},
	} {
		if got := NilInside(tc.v); got != tc.want {
			t.Errorf("NilInside(%s) = %t, want %t", tc.name, got, tc.want)
		}
	}
}
