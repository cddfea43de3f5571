package monitoring

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// promql is Prometheus' own PromQL parser, as the server configures it by
// default.
var promql = parser.NewParser(parser.Options{})

// parseRules checks a rule file as promtool check rules does.
func parseRules(t *testing.T, what string, content []byte) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%s: %v", what, err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// alert is what the test compares between the rule file and the docs.
type alert struct{ name, expr, forDuration string }

func alerts(groups *rulefmt.RuleGroups) []alert {
	var out []alert
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			out = append(out, alert{r.Alert, r.Expr, r.For.String()})
		}
	}
	return out
}

// The PrometheusRule's spec passes Prometheus' rule-file checks, and its
// alerts are those docs/operations.md recommends.
func TestPrometheusRule(t *testing.T) {
	data, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	spec, err := yaml.JSONToYAML(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	got := alerts(parseRules(t, "prometheusrule.yaml spec", spec))
	if len(got) == 0 {
		t.Fatal("prometheusrule.yaml has no alerts")
	}

	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)## Alert rules\n.*?```yaml\n(.*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/operations.md has no yaml block under ## Alert rules")
	}
	want := alerts(parseRules(t, "docs/operations.md", block[1]))
	if len(got) != len(want) {
		t.Fatalf("prometheusrule.yaml has alerts %v, docs/operations.md %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("alert %d: prometheusrule.yaml has %+v, docs/operations.md %+v", i, got[i], want[i])
		}
	}
}

// The rule check refuses what promtool refuses, or the test above would
// prove nothing.
func TestRuleCheckRejectsBadRules(t *testing.T) {
	for _, bad := range []string{
		"groups: [{name: g, rules: [{alert: A, expr: 'sum(relect_is_leader'}]}]",       // PromQL syntax
		"groups: [{name: g, rules: [{alert: A, expr: 'up', fore: 5m}]}]",               // unknown field
		"groups: [{name: g, rules: [{alert: A, expr: 'up', for: soon}]}]",              // duration
		"groups: [{name: g, rules: [{alert: A, expr: 'up', annotations: {s: '{{'}}]}]", // template
	} {
		if _, errs := rulefmt.Parse([]byte(bad), false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler)); len(errs) == 0 {
			t.Errorf("accepted %s", bad)
		}
	}
}

// grafanaVar matches a Grafana variable in a query: $name or ${name}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

// Every dashboard query is PromQL once Grafana has put in its variables.
func TestDashboardQueries(t *testing.T) {
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	queries := 0
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			query := grafanaVar.ReplaceAllStringFunc(target.Expr, func(v string) string {
				if strings.HasPrefix(grafanaVar.FindStringSubmatch(v)[1], "__") {
					return "5m" // $__rate_interval and the like: a range
				}
				return "x" // the dashboard's own variables, in label matchers
			})
			if _, err := promql.ParseExpr(query); err != nil {
				t.Errorf("panel %q: %s: %v", p.Title, target.Expr, err)
			}
			queries++
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no queries")
	}
}
