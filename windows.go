package dlqdump

import (
	"fmt"
	"time"
)

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

// Window is a daily time window: from Start to End after midnight in
// Location (End before Start wraps past midnight).
type Window struct {
	Start, End time.Duration
	Location   *time.Location
}

// DailyWindow returns the window from start to end, given as "15:04" or
// "15:04:05", in loc (nil: UTC).
func DailyWindow(start, end string, loc *time.Location) (Window, error) {
	parse := func(s string) (time.Duration, error) {
		for _, layout := range []string{"15:04:05", "15:04"} {
			if t, err := time.Parse(layout, s); err == nil {
				return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second, nil
			}
		}
		return 0, fmt.Errorf("%w: window time %q: want HH:MM or HH:MM:SS", ErrConfig, s)
	}
	a, err := parse(start)
	if err != nil {
		return Window{}, err
	}
	b, err := parse(end)
	if err != nil {
		return Window{}, err
	}
	if loc == nil {
		loc = time.UTC
	}
	return Window{Start: a, End: b, Location: loc}, nil
}

// contains reports whether t is in the window.
func (w Window) contains(t time.Time) bool {
	t = t.In(w.loc())
	d := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())
	if w.Start <= w.End {
		return d >= w.Start && d < w.End
	}
	return d >= w.Start || d < w.End
}

// next returns the next time at or after t the window opens.
func (w Window) next(t time.Time) time.Time {
	if w.contains(t) {
		return t
	}
	t = t.In(w.loc())
	y, m, d := t.Date()
	open := time.Date(y, m, d, 0, 0, 0, 0, w.loc()).Add(w.Start)
	if !open.After(t) {
		open = time.Date(y, m, d+1, 0, 0, 0, 0, w.loc()).Add(w.Start)
	}
	return open
}

func (w Window) loc() *time.Location {
	if w.Location == nil {
		return time.UTC
	}
	return w.Location
}
