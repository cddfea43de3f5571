// Package monitoring holds an operator's kit for relect's metrics (the
// relect/metrics Collector): a Grafana dashboard (grafana-dashboard.json)
// and the alerts docs/operations.md recommends as a prometheus-operator
// PrometheusRule (prometheusrule.yaml).
//
// The package has no code. Its test checks the PromQL with Prometheus' own
// parsers: the rule file's spec as promtool check rules does (PromQL,
// templates, durations, unknown fields), every dashboard query, and that
// the alerts are those of docs/operations.md. It is a module of its own so
// that relect's module does not depend on Prometheus' server module, and it
// does not depend on relect, whose Kubernetes dependencies Prometheus'
// module would move to other versions and so rebuild: the checks that need
// relect — strict schemas, and every metric named being one a real
// Collector exports — are in the deploy package of relect's module
// (deploy/monitoring_test.go).
package monitoring
