package main

import (
	"testing"

	"github.com/relect/relect"
	corev1 "k8s.io/api/core/v1"
)

// TestStampOnlyOverOlderFences: a term stamps a ConfigMap that is
// unstamped or stamped by an older fence, and leaves one that carries its
// own fence or a newer one (a deposed leader's late reconcile).
func TestStampOnlyOverOlderFences(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored string // the fence annotation already there; "" for none
		fence  relect.Fence
		want   bool
	}{
		{"unstamped", "", "100", true},
		{"older fence", "99", "100", true},
		{"older fence, fewer digits", "9", "100", true},
		{"same fence", "100", "100", false},
		{"newer fence", "101", "100", false},
		{"a stored fence garbled by hand", "oops", "100", true}, // never blocks the terms to come
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{}
			if tc.stored != "" {
				cm.Annotations = map[string]string{annotationFence: tc.stored, annotationLeader: "other"}
			}
			if got := stamp(cm, "me", 7, tc.fence); got != tc.want {
				t.Fatalf("stamp over %q with %q: %v, want %v", tc.stored, tc.fence, got, tc.want)
			}
			want := map[bool]string{true: "me", false: "other"}[tc.want]
			if tc.stored == "" && !tc.want {
				want = ""
			}
			if got := cm.Annotations[annotationLeader]; got != want {
				t.Errorf("leader annotation %q, want %q", got, want)
			}
			if tc.want && (cm.Annotations[annotationTerm] != "7" || cm.Annotations[annotationFence] != string(tc.fence)) {
				t.Errorf("stamp %v", cm.Annotations)
			}
		})
	}
}
