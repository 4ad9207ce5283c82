package console

// ChangePatterns returns the patterns of every change the console makes,
// with the least role each needs.
func ChangePatterns(h *Handler) map[string]Role {
	out := map[string]Role{}
	for _, c := range h.changeRoutes() {
		out[c.pattern] = c.role
	}
	return out
}
