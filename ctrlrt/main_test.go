package ctrlrt_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain fails the run if any test leaves a goroutine behind: every
// goroutine a term starts (its controllers' workers, sources and queues,
// the informers' listeners of its event handlers) ends with it, and the
// Manager's with Start.
func TestMain(m *testing.M) {
	// controller-runtime's own loggers (sources, queues) log through the
	// global delegating logger; give it one, as every program does.
	ctrllog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m,
		// klog's flush daemon, started by client-go's init.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}
