package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/console"
)

func newUICmd(a *app) *cobra.Command {
	var (
		addr      string
		readOnly  bool
		protoFile string
		protoMsg  string
	)
	cmd := &cobra.Command{
		Use:   "ui LOCATION",
		Short: "Serve a web console of a dump: records, segments, restore jobs",
		Long: `Serve the web console (package console) of a dump until interrupted: an
overview (segments and records by area, the oldest ready record, records by
reason and by error over time), the segments with their state, a record
browser (time range, header values, payload text, a JSON path) and the
restore jobs: start one from a selection at a velocity, watch, pause,
resume, cancel it; release quarantined segments. Every change asks for
confirmation, is a POST the page protects against other sites, and is
logged on stderr. --read-only refuses every change and shows no control.

It listens on 127.0.0.1:8081 unless --addr says otherwise, and there answers
only requests for localhost, 127.0.0.1 or [::1]. It has no authentication:
on another address, put a proxy that authenticates in front of it (or mount
console.New in your program behind your middleware).

Records of encrypted segments show their metadata only unless an identity
is given (--identity, DLQDUMP_IDENTITY, DLQDUMP_AWS_KMS); protobuf payloads
show as protojson with --proto-descriptor and --proto-message (see cat).`,
		Example: `  dlqdump ui /var/lib/app/dlq
  dlqdump ui s3://dead-letters/orders/ --read-only --addr 127.0.0.1:9000`,
		Args: argsRange(1, 1, "LOCATION"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if (protoFile == "") != (protoMsg == "") {
				return usageErrorf("--proto-descriptor and --proto-message go together")
			}
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			o := &console.Options{Reader: l.reader, Name: l.String(), ReadOnly: readOnly, ProtoMessage: protoMsg,
				Logger: slog.New(slog.NewTextHandler(lineWriter{a}, nil))}
			if host, _, err := net.SplitHostPort(addr); err == nil {
				if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
					// Only this machine reaches it: its changes are the
					// person's who started it (--actor, or the OS user).
					actor := a.actor()
					o.User = func(*http.Request) string { return actor }
				}
			}
			if protoFile != "" {
				if _, err := loadProto(protoFile, protoMsg); err != nil {
					return err
				}
				if o.ProtoDescriptorSet, err = os.ReadFile(protoFile); err != nil {
					return fmt.Errorf("--proto-descriptor: %w", err)
				}
			}
			ring, err := a.keys()
			if err != nil {
				return err
			}
			if ring != nil {
				o.Keys = ring
			}
			h, err := console.New(o)
			if err != nil {
				return err
			}
			return a.serveUI(addr, h, readOnly, l.String())
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:8081", "address to listen on (host:port; port 0 picks one)")
	fl.BoolVar(&readOnly, "read-only", false, "refuse every change (403) and show no control")
	fl.StringVar(&protoFile, "proto-descriptor", "", "FileDescriptorSet file to show protobuf payloads as protojson")
	fl.StringVar(&protoMsg, "proto-message", "", "full name of the payloads' protobuf message, e.g. shop.v1.Order")
	return cmd
}

// serveUI serves h on addr until the first interrupt.
func (a *app) serveUI(addr string, h http.Handler, readOnly bool, where string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", addr, err)
	}
	if loopback(ln.Addr()) {
		h = localHosts(ln.Addr().(*net.TCPAddr).Port, h)
	} else {
		a.warnf("listening on %s, beyond this machine: the console has no authentication; put an authenticating proxy in front of it", ln.Addr())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	mode := ""
	if readOnly {
		mode = ", read-only"
	}
	stopping := "stopping the console: the requests under way end first, for at most 5s"
	a.stopping.Store(&stopping)
	// Always printed: the address is what the command is for.
	a.printErr(fmt.Sprintf("dlqdump: console of %s at http://%s/%s; interrupt to stop", where, ln.Addr(), mode))
	select {
	case err := <-done:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-a.soft.Done():
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// loopback reports whether addr is a loopback address.
func loopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// localHosts serves only requests addressed to this machine by name
// (localhost, 127.0.0.1, [::1] and the port): a page of another site whose
// name it made resolve to 127.0.0.1 (DNS rebinding) would be of the same
// origin as the console, and could read its token.
func localHosts(port int, h http.Handler) http.Handler {
	ok := map[string]bool{}
	for _, host := range []string{"localhost", "127.0.0.1", "[::1]"} {
		ok[fmt.Sprintf("%s:%d", host, port)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok[strings.ToLower(r.Host)] {
			http.Error(w, "dlqdump ui: this console answers only to localhost, 127.0.0.1 and [::1] (a request for "+strconv.Quote(r.Host)+" was refused)", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// lineWriter writes log lines through printErr, so they do not mix with a
// progress bar or another message.
type lineWriter struct{ a *app }

func (w lineWriter) Write(p []byte) (int, error) {
	w.a.printErr(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
