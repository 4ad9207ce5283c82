package dlqdump

import (
	"reflect"
	"testing"
)

// Report.add sums every count of a Report: a field added to Report and not
// to add would be lost by passes with several segments in flight.
func TestReportAddSumsEveryField(t *testing.T) {
	var o Report
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Uint64:
			f.SetUint(uint64(i + 1))
		}
	}
	o.ByReason = map[string]uint64{"x": 1}
	o.Changes = []Change{{Err: "x"}}
	var rep Report
	rep.add(&o)
	rep.add(&o)
	got := reflect.ValueOf(rep)
	for i := range got.NumField() {
		name := got.Type().Field(i).Name
		switch f := got.Field(i); f.Kind() {
		case reflect.Int, reflect.Int64:
			if f.Int() != 2*int64(i+1) {
				t.Errorf("Report.%s: %d after adding %d twice", name, f.Int(), i+1)
			}
		case reflect.Uint64:
			if f.Uint() != 2*uint64(i+1) {
				t.Errorf("Report.%s: %d after adding %d twice", name, f.Uint(), i+1)
			}
		case reflect.Map:
		case reflect.Slice:
			if f.Len() != 2 {
				t.Errorf("Report.%s: %d elements after adding 1 twice", name, f.Len())
			}
		default:
			t.Errorf("Report.%s: a %s, which this test does not know how to add", name, f.Kind())
		}
	}
	if rep.ByReason["x"] != 2 {
		t.Errorf("ByReason %v", rep.ByReason)
	}
}
