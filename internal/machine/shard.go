package machine

import (
	"sort"
	"strings"
)

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
