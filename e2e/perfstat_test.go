package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// What the benchmark reads of the control plane: its processes' CPU time
// from /proc, and the apiserver's own request counters from /metrics.

// userHZ is the unit of utime and stime in /proc/<pid>/stat: Linux exports
// them in USER_HZ, 100 per second on every architecture.
const userHZ = 100

// controlPlanePIDs finds this cluster's kube-apiserver and etcd processes by
// their command lines: the apiserver's names its certificate directory, etcd's
// its data directory (envtest passes both as flags). Another control plane
// running on the machine is not mistaken for this one.
func (c *cluster) controlPlanePIDs() (api, etcd int, err error) {
	certDir := c.env.ControlPlane.APIServer.CertDir
	dataDir := c.env.ControlPlane.Etcd.DataDir
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		switch filepath.Base(args[0]) {
		case "kube-apiserver":
			if hasArgWith(args[1:], certDir) {
				api = pid
			}
		case "etcd":
			if hasArgWith(args[1:], dataDir) {
				etcd = pid
			}
		}
	}
	if api == 0 || etcd == 0 {
		return 0, 0, fmt.Errorf("kube-apiserver (pid %d) or etcd (pid %d) of %s not found in /proc", api, etcd, filepath.Dir(certDir))
	}
	return api, etcd, nil
}

func hasArgWith(args []string, s string) bool {
	for _, a := range args {
		if strings.Contains(a, s) {
			return true
		}
	}
	return false
}

// cpuTime is the CPU time (user + system) process pid has used.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields 14 and 15 (utime, stime) count from the state after it.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, field := range f[11:13] {
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// apiMetrics is what the benchmark reads of the apiserver's /metrics.
type apiMetrics struct {
	leaseRequests map[string]float64 // apiserver_request_total{resource="leases"} by verb
	leaseWatches  float64            // apiserver_longrunning_requests{resource="leases",verb="WATCH"}: open now
	// watchEvents and watchBytes: the Lease watch events sent to watchers,
	// one per event and watcher, and their bytes as written
	// (apiserver_watch_events_total and apiserver_watch_events_sizes_sum,
	// resource="leases").
	watchEvents, watchBytes float64
	// rejected: requests API Priority and Fairness rejected (429), of any
	// resource (apiserver_flowcontrol_rejected_requests_total);
	// workloadLow: the requests it dispatched through the FlowSchema
	// service-accounts to the priority level workload-low, where the
	// benchmark's ServiceAccount lands
	// (apiserver_flowcontrol_dispatched_requests_total).
	rejected, workloadLow float64
}

func (m apiMetrics) total() float64 {
	var n float64
	for _, v := range m.leaseRequests {
		n += v
	}
	return n
}

var verbLabel = regexp.MustCompile(`[{,]verb="([A-Z]+)"`)

// scrapeMetrics reads the apiserver's /metrics. (A scrape costs the
// apiserver some CPU; every measured window has the same two scrapes.)
func (c *cluster) scrapeMetrics(ctx context.Context) (apiMetrics, error) {
	cfg := c.adminConfig()
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return apiMetrics{}, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiMetrics{}, fmt.Errorf("reading the apiserver's /metrics: %w", err)
	}
	m := apiMetrics{leaseRequests: map[string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, _, _ := strings.Cut(line, "{")
		var into *float64
		switch leases := strings.Contains(line, `resource="leases"`); {
		case name == "apiserver_flowcontrol_rejected_requests_total":
			into = &m.rejected
		case name == "apiserver_flowcontrol_dispatched_requests_total":
			if !strings.Contains(line, `flow_schema="service-accounts"`) || !strings.Contains(line, `priority_level="workload-low"`) {
				continue
			}
			into = &m.workloadLow
		case !leases:
			continue
		case name == "apiserver_watch_events_total":
			into = &m.watchEvents
		case name == "apiserver_watch_events_sizes_sum":
			into = &m.watchBytes
		case name != "apiserver_request_total" && name != "apiserver_longrunning_requests":
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return apiMetrics{}, fmt.Errorf("/metrics: %q: %v", line, err)
		}
		if into != nil {
			*into += v
			continue
		}
		verb := "?"
		if mm := verbLabel.FindStringSubmatch(line); mm != nil {
			verb = mm[1]
		}
		if name == "apiserver_request_total" {
			m.leaseRequests[verb] += v
		} else if verb == "WATCH" {
			m.leaseWatches += v
		}
	}
	return m, sc.Err()
}

// load is one sample of everything a window of the N = 200 row measures.
type load struct {
	at              time.Time
	api, etcd, self time.Duration // CPU time used so far
	metrics         apiMetrics
	apiPID, etcdPID int
}

func (c *cluster) sampleLoad(ctx context.Context) (load, error) {
	var l load
	var err error
	l.apiPID, l.etcdPID, err = c.controlPlanePIDs()
	if err != nil {
		return l, err
	}
	if l.metrics, err = c.scrapeMetrics(ctx); err != nil {
		return l, err
	}
	l.at = time.Now()
	for _, x := range []struct {
		pid int
		d   *time.Duration
	}{{l.apiPID, &l.api}, {l.etcdPID, &l.etcd}, {os.Getpid(), &l.self}} {
		if *x.d, err = cpuTime(x.pid); err != nil {
			return l, err
		}
	}
	return l, nil
}

// loadRates is a window between two samples, per minute or per second.
type loadRates struct {
	window                   time.Duration
	apiCPU, etcdCPU, selfCPU float64            // CPU seconds per minute
	leaseReqs                float64            // lease requests per second, apiserver's count
	leaseReqsByVerb          map[string]float64 // the same by verb
	openWatches              float64            // lease watches open at the end
	watchEvents, watchBytes  float64            // Lease watch events (one per watcher) and their bytes sent per second
}

func rates(a, b load) loadRates {
	w := b.at.Sub(a.at)
	perMin := func(d time.Duration) float64 { return d.Seconds() / w.Minutes() }
	r := loadRates{
		window:          w,
		apiCPU:          perMin(b.api - a.api),
		etcdCPU:         perMin(b.etcd - a.etcd),
		selfCPU:         perMin(b.self - a.self),
		leaseReqs:       (b.metrics.total() - a.metrics.total()) / w.Seconds(),
		leaseReqsByVerb: map[string]float64{},
		openWatches:     b.metrics.leaseWatches,
		watchEvents:     (b.metrics.watchEvents - a.metrics.watchEvents) / w.Seconds(),
		watchBytes:      (b.metrics.watchBytes - a.metrics.watchBytes) / w.Seconds(),
	}
	for v, n := range b.metrics.leaseRequests {
		if d := n - a.metrics.leaseRequests[v]; d > 0 {
			r.leaseReqsByVerb[v] = d / w.Seconds()
		}
	}
	return r
}

func (r loadRates) String() string {
	var verbs []string
	for v, n := range r.leaseReqsByVerb {
		verbs = append(verbs, fmt.Sprintf("%s %.2f/s", v, n))
	}
	sort.Strings(verbs)
	return fmt.Sprintf("window %v: apiserver CPU %.2f s/min, etcd CPU %.2f s/min, test process CPU %.2f s/min; "+
		"apiserver lease requests %.2f/s (%s); lease watches open %.0f; Lease watch events sent %.1f/s, %.0f bytes/s",
		r.window.Round(time.Millisecond), r.apiCPU, r.etcdCPU, r.selfCPU, r.leaseReqs, strings.Join(verbs, ", "), r.openWatches, r.watchEvents, r.watchBytes)
}
