package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
)

// Role is what a console user may do. Each role may do what the roles below
// it may.
type Role uint8

// Roles.
const (
	// RoleViewer looks: the overview, segments, records (payloads
	// included), jobs and the change log. No change.
	RoleViewer Role = iota + 1
	// RoleOperator also acts on dead letters one selection at a time:
	// replays records, creates, pauses, resumes and cancels restore jobs,
	// and releases named quarantined segments.
	RoleOperator
	// RoleAdmin also discards records (sets them aside with a reason,
	// out of the replay) and releases the whole quarantine at once.
	RoleAdmin
)

// String returns "viewer", "operator" or "admin".
func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole returns the role named s ("viewer", "operator", "admin").
func ParseRole(s string) (Role, error) {
	for r := RoleViewer; r <= RoleAdmin; r++ {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("console: unknown role %q (want viewer, operator or admin)", s)
}

// Principal is who is behind a request, as Options.Authorize says.
type Principal struct {
	// Name is who it is, as the change log and the console's own log
	// record them: a user name, an e-mail address, a service account.
	// Empty: the client's address is recorded instead.
	Name string
	// Role is what they may do. The zero Role may do nothing, not even
	// look.
	Role Role
}

// ErrUnauthenticated may be wrapped by an error of Options.Authorize to have
// the console answer 401 Unauthorized (the request carries no identity)
// rather than 403 Forbidden (it does, and may not use the console).
var ErrUnauthenticated = errors.New("console: not authenticated")

// principal returns who is behind r: Options.Authorize's answer, or, without
// it, an admin named by Options.User or the client's address. ReadOnly makes
// every principal a viewer.
func (h *Handler) principal(r *http.Request) (Principal, error) {
	var p Principal
	if h.o.Authorize != nil {
		var err error
		if p, err = h.o.Authorize(r); err != nil {
			return Principal{}, err
		}
	} else {
		p.Role = RoleAdmin
	}
	if p.Name == "" && h.o.User != nil {
		p.Name = h.o.User(r)
	}
	if p.Name == "" {
		p.Name = r.RemoteAddr
	}
	if h.o.ReadOnly && p.Role > RoleViewer {
		p.Role = RoleViewer
	}
	return p, nil
}

// authorize wraps every route: a request whose principal may not look is
// refused (401 or 403).
func (h *Handler) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := h.principal(r)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			h.log.Info("refused a request without an identity", slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr), slog.Any("error", err))
			writeError(w, http.StatusUnauthorized, "not authenticated: %v", err)
			return
		case err != nil:
			h.log.Warn("refused a request: the authorisation hook said no", slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr), slog.Any("error", err))
			writeError(w, http.StatusForbidden, "not authorized: %v", err)
			return
		case p.Role < RoleViewer:
			h.log.Warn("refused a request: no role", slog.String("who", p.Name), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
			writeError(w, http.StatusForbidden, "not authorized: %s has no role in this console", p.Name)
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// needs wraps a change's handler: refused (403) unless the principal's role
// is at least role. The refusal is logged, not written to the change log
// (nothing changed).
func (h *Handler) needs(role Role, fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		if p.Role < role {
			h.log.Warn("refused a change: the role does not allow it", slog.String("who", p.Name), slog.String("role", p.Role.String()),
				slog.String("needs", role.String()), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
			reason := fmt.Sprintf("%s is a %s here; this needs the %s role", p.Name, p.Role, role)
			if h.o.ReadOnly {
				reason = "the console is read-only"
			}
			writeError(w, http.StatusForbidden, "%s", reason)
			return
		}
		fn(w, r)
	}
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf returns the principal authorize put into r's context.
func principalOf(r *http.Request) Principal {
	p, _ := r.Context().Value(principalKey{}).(Principal)
	return p
}
