// Package metrics groups the ready-made implementations of
// dlqdump.MetricsWriter:
//
//   - metrics/log writes the events to a *slog.Logger;
//   - metrics/prometheus counts them in Prometheus collectors registered on a
//     caller-supplied prometheus.Registerer.
//
// This package itself holds no code.
package metrics
