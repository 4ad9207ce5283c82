package dlqdump

import "time"

// windowAt returns when the next of the windows opens (now if one is open)
// and when that window closes.
func windowAt(windows []Window, now time.Time) (open, closes time.Time) {
	for i, w := range windows {
		o := w.next(now)
		c := o.In(w.loc())
		y, m, d := c.Date()
		end := time.Date(y, m, d, 0, 0, 0, 0, w.loc()).Add(w.End)
		if w.Start > w.End && (o.Equal(now) && end.Before(o) || !o.Equal(now)) {
			end = end.AddDate(0, 0, 1)
		}
		if !end.After(o) {
			end = end.AddDate(0, 0, 1)
		}
		if i == 0 || o.Before(open) || o.Equal(open) && end.After(closes) {
			open, closes = o, end
		}
	}
	return open, closes
}

// NextWindow returns when the next of windows opens (now, if one is open)
// and when that window closes. With no windows it returns now and the zero
// time: always open.
func NextWindow(windows []Window, now time.Time) (open, closes time.Time) {
	if len(windows) == 0 {
		return now, time.Time{}
	}
	return windowAt(windows, now)
}
