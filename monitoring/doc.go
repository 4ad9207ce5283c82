// Package monitoring holds dlqdump's Prometheus alerting rules
// (alerts.yml, unit-tested by promtool in alerts_test.yml) and Grafana
// dashboard (grafana/dlqdump.json). Its tests check that every expression
// in them parses and names only series that metrics/prometheus exports. It
// is a module of its own so that the Prometheus server's packages the tests
// parse with stay out of the library's dependencies.
package monitoring
