package crtest

import "testing"

func TestSeriesSum(t *testing.T) {
	body := `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="secrets",verb="LIST"} 3
apiserver_request_total{code="200",resource="pods",verb="LIST"} 4
apiserver_request_total{code="201",resource="secrets",verb="POST"} 5
# TYPE go_goroutines gauge
go_goroutines 42
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="LIST",le="+Inf"} 7
apiserver_request_duration_seconds_sum{verb="LIST"} 0.5
apiserver_request_duration_seconds_count{verb="LIST"} 7
plain_untyped 2.5
`
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"apiserver_request_total", nil, 12},
		{"apiserver_request_total", map[string]string{"verb": "LIST"}, 7},
		{"apiserver_request_total", map[string]string{"verb": "LIST", "resource": "secrets"}, 3},
		{"apiserver_request_total", map[string]string{"verb": "DELETE"}, 0},
		{"go_goroutines", nil, 42},
		{"apiserver_request_duration_seconds", map[string]string{"verb": "LIST"}, 7},
		{"apiserver_request_duration_seconds_count", map[string]string{"verb": "LIST"}, 7},
		{"apiserver_request_duration_seconds_sum", nil, 0},
		{"plain_untyped", nil, 2.5},
		{"absent", nil, 0},
	} {
		if got := SeriesSum(body, c.name, c.labels); got != c.want {
			t.Errorf("%s %v: %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
