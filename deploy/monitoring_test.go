package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/relect/relect"
	"github.com/relect/relect/metrics"
	"github.com/relect/relect/relecttest"
	"sigs.k8s.io/yaml"
)

// The operator's kit in deploy/monitoring: here, the strict schema of both
// files and that every metric they name is one relect exports; PromQL
// syntax and the rule-file checks of promtool are in deploy/monitoring's
// own module (Prometheus' parsers).

// exportedMetrics returns the names of the metrics a real Collector
// exports, gathered from an Elector that has led a term on the in-memory
// Lease API, its work beating (so that the series that appear only after
// the first call, renewal and beat are there too).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "job") // acquired at once
	e, err := relect.New(relect.Options{
		Client: api.Client("a").Clientset(), Namespace: "default", Name: "job", Identity: "a",
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
		Work: relect.WorkOptions{BeatWindow: time.Minute},
		OnStartedLeading: func(ctx context.Context) {
			relect.Beat(ctx)
			<-ctx.Done()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	for deadline := time.Now().Add(20 * time.Second); !e.IsLeader() || e.Stats().LastRenewal.IsZero() || e.Stats().LastBeat.IsZero(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Elector never led")
		}
	}
	c, err := metrics.NewCollector(e, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, must := range []string{"relect_is_leader", "relect_api_calls_total", "relect_last_renewal_timestamp_seconds",
		"relect_work_last_beat_timestamp_seconds"} {
		if !names[must] {
			t.Fatalf("the Collector exported no %s: %v", must, names)
		}
	}
	return names
}

// relectMetric matches a metric name of relect in a query. Every metric
// relect exports starts with relect_; the dashboard and rules use no
// other.
var relectMetric = regexp.MustCompile(`\brelect_[a-z_]+\b`)

// otherMetric matches what would be a metric name of another exporter in a
// selector position, which the check above would miss.
var otherMetric = regexp.MustCompile(`\b(up|[a-z]+_[a-z_]+_total)\b\s*[{\[]`)

// checkNames fails for every metric name in expr that relect does not
// export.
func checkNames(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	names := relectMetric.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q names no relect metric", where, expr)
	}
	for _, name := range names {
		if !exported[name] {
			t.Errorf("%s: relect exports no metric %s (in %q)", where, name, expr)
		}
	}
	for _, m := range otherMetric.FindAllStringSubmatch(expr, -1) {
		if !exported[m[1]] {
			t.Errorf("%s: %s is not a relect metric (in %q)", where, m[1], expr)
		}
	}
}

// prometheusRule is a PrometheusRule as prometheus-operator defines it
// (monitoring.coreos.com/v1), decoded strictly: unknown fields fail.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace,omitempty"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert         string            `json:"alert,omitempty"`
				Record        string            `json:"record,omitempty"`
				Expr          string            `json:"expr"`
				For           string            `json:"for,omitempty"`
				KeepFiringFor string            `json:"keep_firing_for,omitempty"`
				Labels        map[string]string `json:"labels,omitempty"`
				Annotations   map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func TestPrometheusRuleSchema(t *testing.T) {
	data, err := os.ReadFile("monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rule prometheusRule
	if err := yaml.UnmarshalStrict(data, &rule); err != nil {
		t.Fatalf("monitoring/prometheusrule.yaml: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" || rule.Metadata.Name == "" {
		t.Errorf("apiVersion %q kind %q name %q: want a named monitoring.coreos.com/v1 PrometheusRule",
			rule.APIVersion, rule.Kind, rule.Metadata.Name)
	}
	exported := exportedMetrics(t)
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if r.Alert == "" || r.Record != "" {
				t.Errorf("group %s: a rule that is not an alert: %+v", g.Name, r)
			}
			if r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("%s: want a summary annotation and a severity label", where)
			}
			checkNames(t, where, r.Expr, exported)
			alerts++
		}
	}
	if alerts == 0 {
		t.Error("no alerts")
	}
}

// dashboard is the part of Grafana's dashboard JSON model that this
// dashboard uses, decoded strictly: a misspelt or unexpected field fails.
type dashboard struct {
	Title         string   `json:"title"`
	UID           string   `json:"uid"`
	Description   string   `json:"description"`
	Tags          []string `json:"tags"`
	SchemaVersion int      `json:"schemaVersion"`
	Version       int      `json:"version"`
	Editable      bool     `json:"editable"`
	GraphTooltip  int      `json:"graphTooltip"`
	Refresh       string   `json:"refresh"`
	Time          struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Timezone   string `json:"timezone"`
	Templating struct {
		List []struct {
			Name       string         `json:"name"`
			Label      string         `json:"label"`
			Type       string         `json:"type"`
			Query      string         `json:"query"`
			Datasource *datasourceRef `json:"datasource,omitempty"`
			Refresh    int            `json:"refresh,omitempty"`
			IncludeAll bool           `json:"includeAll,omitempty"`
			Multi      bool           `json:"multi,omitempty"`
			AllValue   string         `json:"allValue,omitempty"`
			Current    map[string]any `json:"current"`
			Hide       int            `json:"hide"`
			Sort       int            `json:"sort,omitempty"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []json.RawMessage `json:"list"`
	} `json:"annotations"`
	Panels []struct {
		ID          int           `json:"id"`
		Type        string        `json:"type"`
		Title       string        `json:"title"`
		Description string        `json:"description"`
		Datasource  datasourceRef `json:"datasource"`
		GridPos     struct {
			H int `json:"h"`
			W int `json:"w"`
			X int `json:"x"`
			Y int `json:"y"`
		} `json:"gridPos"`
		Targets []struct {
			RefID        string        `json:"refId"`
			Datasource   datasourceRef `json:"datasource"`
			Expr         string        `json:"expr"`
			LegendFormat string        `json:"legendFormat"`
		} `json:"targets"`
		FieldConfig struct {
			Defaults  map[string]any `json:"defaults"`
			Overrides []any          `json:"overrides"`
		} `json:"fieldConfig"`
		Options map[string]any `json:"options"` // depends on the panel type
	} `json:"panels"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// grafanaVar matches a Grafana variable in a query: $name or ${name}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

func TestGrafanaDashboardSchema(t *testing.T) {
	data, err := os.ReadFile("monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("monitoring/grafana-dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion <= 0 {
		t.Errorf("title %q uid %q schemaVersion %d: want all three", d.Title, d.UID, d.SchemaVersion)
	}
	prometheusDS := datasourceRef{Type: "prometheus", UID: "${datasource}"}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch {
		case v.Type == "datasource" && v.Query == "prometheus":
		case v.Type == "query" && v.Datasource != nil && *v.Datasource == prometheusDS:
			checkNames(t, "variable "+v.Name, v.Query, map[string]bool{"relect_info": true})
		default:
			t.Errorf("variable %s: want a Prometheus data source or a query on it, got %+v", v.Name, v)
		}
	}
	if !vars["datasource"] {
		t.Error("no datasource variable")
	}

	exported := exportedMetrics(t)
	ids := map[int]bool{}
	type cell struct{ x, y int }
	used := map[cell]string{}
	for _, p := range d.Panels {
		where := "panel " + p.Title
		if ids[p.ID] {
			t.Errorf("%s: id %d used twice", where, p.ID)
		}
		ids[p.ID] = true
		if p.Description == "" || !slices.Contains([]string{"stat", "timeseries"}, p.Type) || p.Datasource != prometheusDS {
			t.Errorf("%s: want a description, type stat or timeseries, and the ${datasource} data source", where)
		}
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside Grafana's 24 columns", where, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := used[cell{x, y}]; ok {
					t.Errorf("%s overlaps panel %s", where, other)
				}
				used[cell{x, y}] = p.Title
			}
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", where)
		}
		refIDs := map[string]bool{}
		for _, q := range p.Targets {
			if refIDs[q.RefID] || q.RefID == "" || q.Datasource != prometheusDS {
				t.Errorf("%s: query %s: want a unique refId and the ${datasource} data source", where, q.RefID)
			}
			refIDs[q.RefID] = true
			for _, m := range grafanaVar.FindAllStringSubmatch(q.Expr, -1) {
				if name := m[1]; name[:min(2, len(name))] != "__" && !vars[name] {
					t.Errorf("%s: query uses undefined variable $%s", where, name)
				}
			}
			checkNames(t, where, q.Expr, exported)
		}
	}
}
