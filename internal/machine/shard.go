package machine

import (
	"sort"
	"strings"
)

// carried is the CR's values of the labels its shard selector names (see helm/shard.go).
func (p *pass) carried() map[string]string {
	keys := p.w.Carried
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		if v, ok := p.obj.GetLabels()[k]; ok {
			out[k] = v
		}
	}
	return out
}

// DescribeLabels renders the carried labels as a selector would ("k=v", "!k").
func DescribeLabels(keys []string, l map[string]string) string {
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if v, ok := l[k]; ok {
			parts = append(parts, k+"="+v)
		} else {
			parts = append(parts, "!"+k)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
