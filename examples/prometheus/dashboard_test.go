package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// This file checks grafana/reqlock.json: that it is a dashboard Grafana
// imports (checkDashboardShape), and that every metric and label its PromQL
// queries use is one the service exports (checkQueries), parsing each query
// with Prometheus's own PromQL parser.

// dashboardFile is the dashboard the test checks.
const dashboardFile = "grafana/reqlock.json"

// The dashboard's schema: the fields Grafana needs, in its classic JSON model
// (schemaVersion 42 is the last of it).
type (
	grafanaDashboard struct {
		UID           string     `json:"uid"`
		Title         string     `json:"title"`
		SchemaVersion int        `json:"schemaVersion"`
		Panels        []gfPanel  `json:"panels"`
		Templating    gfTemplate `json:"templating"`
	}
	gfPanel struct {
		ID         int         `json:"id"`
		Type       string      `json:"type"`
		Title      string      `json:"title"`
		Datasource *gfDSRef    `json:"datasource"`
		GridPos    *gfGridPos  `json:"gridPos"`
		Targets    []gfTarget  `json:"targets"`
		Panels     []gfPanel   `json:"panels"` // of a collapsed row
		FieldCfg   *gfFieldCfg `json:"fieldConfig"`
	}
	gfDSRef   struct{ Type, UID string }
	gfGridPos struct{ H, W, X, Y int }
	gfTarget  struct {
		RefID      string   `json:"refId"`
		Expr       string   `json:"expr"`
		Datasource *gfDSRef `json:"datasource"`
	}
	gfFieldCfg struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	}
	gfTemplate struct {
		List []gfVariable `json:"list"`
	}
	gfVariable struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Query      json.RawMessage `json:"query"`      // a string, or {"query": "..."} from the Prometheus query editor
		Definition string          `json:"definition"` // the query as the variables' list shows it
		Datasource *gfDSRef        `json:"datasource"`
	}
)

// query is one PromQL expression of the dashboard, and where it is.
type query struct {
	where string // `panel "Lock wait" target A`, `variable route`
	expr  string // as written, Grafana variables included
	// labelOf is set for a label_values(selector, label) variable: the
	// label whose values it lists, which must be on selector's metric.
	labelOf string
}

// panelKinds are the panel types the dashboard may use: Grafana's core
// visualizations that show PromQL results.
var panelKinds = []string{"timeseries", "stat", "gauge", "bargauge", "table", "heatmap", "barchart"}

// checkDashboardShape checks what Grafana needs to import the dashboard and
// run its queries on the data source its user picks, and returns the
// dashboard's PromQL queries.
func checkDashboardShape(raw []byte) (queries []query, problems []string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, []string{"the dashboard is not JSON: " + err.Error()}
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`).MatchString(d.UID) {
		bad("uid %q: Grafana wants 1 to 40 letters, digits, - or _", d.UID)
	}
	if strings.TrimSpace(d.Title) == "" {
		bad("the dashboard has no title")
	}
	if d.SchemaVersion < 39 || d.SchemaVersion > 42 {
		bad("schemaVersion %d: want that of a current Grafana's classic model (39 to 42)", d.SchemaVersion)
	}

	vars := map[string]gfVariable{}
	for _, v := range d.Templating.List {
		if v.Name == "" {
			bad("a template variable has no name")
		}
		if _, dup := vars[v.Name]; dup {
			bad("two template variables are called %q", v.Name)
		}
		vars[v.Name] = v
	}
	if ds, ok := vars["datasource"]; !ok || ds.Type != "datasource" || string(ds.Query) != `"prometheus"` {
		bad(`no template variable "datasource" of type datasource, query "prometheus", for the user to pick the Prometheus data source`)
	}
	promDS := func(ref *gfDSRef) bool { return ref != nil && ref.Type == "prometheus" && ref.UID == "${datasource}" }
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if !promDS(v.Datasource) {
			bad(`variable %q: datasource must be {"type": "prometheus", "uid": "${datasource}"}, got %+v`, v.Name, v.Datasource)
		}
		q, err := variableQuery(v)
		if err != nil {
			bad("variable %q: %v", v.Name, err)
			continue
		}
		queries = append(queries, q)
	}

	ids := map[int]string{}
	var walk func(panels []gfPanel, inRow bool)
	walk = func(panels []gfPanel, inRow bool) {
		for _, p := range panels {
			name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if p.ID <= 0 {
				bad("%s: id must be a positive integer", name)
			} else if other, dup := ids[p.ID]; dup {
				bad("%s: id %d is also %s's", name, p.ID, other)
			}
			ids[p.ID] = name
			if strings.TrimSpace(p.Title) == "" {
				bad("%s: no title", name)
			}
			if g := p.GridPos; g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				bad("%s: gridPos %+v: want h, w ≥ 1 and x + w ≤ 24", name, p.GridPos)
			}
			if p.Type == "row" {
				if inRow {
					bad("%s: a row inside a row", name)
				}
				walk(p.Panels, true)
				continue
			}
			if !slices.Contains(panelKinds, p.Type) {
				bad("%s: type %q is not one of %v", name, p.Type, panelKinds)
			}
			if !promDS(p.Datasource) {
				bad(`%s: datasource must be {"type": "prometheus", "uid": "${datasource}"}, got %+v`, name, p.Datasource)
			}
			if p.FieldCfg == nil || p.FieldCfg.Defaults.Unit == "" {
				bad("%s: no unit (fieldConfig.defaults.unit)", name)
			}
			if len(p.Targets) == 0 {
				bad("%s: no targets", name)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					bad("%s: refId %q is empty or repeated", name, tg.RefID)
				}
				refs[tg.RefID] = true
				if !promDS(tg.Datasource) {
					bad(`%s target %s: datasource must be {"type": "prometheus", "uid": "${datasource}"}`, name, tg.RefID)
				}
				if strings.TrimSpace(tg.Expr) == "" {
					bad("%s target %s: no expr", name, tg.RefID)
					continue
				}
				queries = append(queries, query{where: fmt.Sprintf("%s target %s", name, tg.RefID), expr: tg.Expr})
			}
		}
	}
	walk(d.Panels, false)
	if len(ids) == 0 {
		bad("the dashboard has no panels")
	}

	// Every variable a query uses is defined, or one of Grafana's own.
	for _, q := range queries {
		for _, m := range grafanaVar.FindAllStringSubmatch(q.expr, -1) {
			name := m[1] + m[2] + m[3]
			if _, ok := vars[name]; !ok && !strings.HasPrefix(name, "__") {
				bad("%s uses $%s, which no template variable defines", q.where, name)
			}
		}
	}
	return queries, problems
}

// variableQuery returns the PromQL of a query variable: the selector of
// label_values(selector, label), or the expression of query_result(expr).
func variableQuery(v gfVariable) (query, error) {
	var text string
	if err := json.Unmarshal(v.Query, &text); err != nil {
		var editor struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &editor); err != nil {
			return query{}, fmt.Errorf("query is neither a string nor an object with a query: %s", v.Query)
		}
		text = editor.Query
	}
	where := "variable " + v.Name
	text = strings.TrimSpace(text)
	if v.Definition != "" && strings.TrimSpace(v.Definition) != text {
		return query{}, fmt.Errorf("definition %q is not its query %q", v.Definition, text)
	}
	if m := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\s*\)$`).FindStringSubmatch(text); m != nil {
		return query{where: where, expr: m[1], labelOf: m[2]}, nil
	}
	if m := regexp.MustCompile(`^query_result\((.+)\)$`).FindStringSubmatch(text); m != nil {
		return query{where: where, expr: m[1]}, nil
	}
	return query{}, fmt.Errorf("query %q: the test knows label_values(selector, label) and query_result(expr) only "+
		"(a label_values without a selector would list the label's values in every metric)", text)
}

// grafanaVar matches a use of a Grafana variable: $name, ${name},
// ${name:format} or [[name]].
var grafanaVar = regexp.MustCompile(`\$\{(\w+)(?::[\w:]+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// varValue stands for a variable's value in a label matcher once expanded.
const varValue = "grafana_variable"

// expand replaces Grafana's variables in expr with values PromQL parses: a
// duration for the interval variables (used in ranges), varValue for the
// others, which the dashboard uses inside label matchers' strings.
func expand(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVar.FindStringSubmatch(v)
		switch m[1] + m[2] + m[3] {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		}
		return varValue
	})
}

// targetLabels are the labels Prometheus adds to every series it scrapes
// (https://prometheus.io/docs/concepts/jobs_instances/): a query may use
// them though the exporter's output lacks them.
var targetLabels = []string{"job", "instance"}

// series is what the scrape says of one series name a query can select.
type series struct {
	family *dto.MetricFamily
	labels map[string]bool // label names seen on it, le on a histogram's _bucket
}

// lookup finds the series name in the scrape: a family of that name, or
// the _bucket, _sum or _count series of a histogram (or summary) family.
func lookup(families map[string]*dto.MetricFamily, name string) (series, bool) {
	if f, ok := families[name]; ok && f.GetType() != dto.MetricType_HISTOGRAM && f.GetType() != dto.MetricType_SUMMARY {
		return series{f, labelNames(f)}, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		f := families[base]
		if !ok || f == nil || (f.GetType() != dto.MetricType_HISTOGRAM && f.GetType() != dto.MetricType_SUMMARY) {
			continue
		}
		if suffix == "_bucket" && f.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		s := series{f, labelNames(f)}
		if suffix == "_bucket" {
			s.labels["le"] = true
		}
		return s, true
	}
	return series{}, false
}

// labelNames returns the names of the labels of f's samples.
func labelNames(f *dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			names[l.GetName()] = true
		}
	}
	return names
}

// checkQueries parses each query with Prometheus's PromQL parser and checks
// that every series it selects is in the scrape, and that every label it
// names (in a matcher, by or without, on or ignoring, group_left or
// group_right, label_replace's source, a label_values variable) is on each
// series it applies to, and that a matcher of a fixed value (= or =~, no
// variable) matches one of its samples. It also checks that
// histogram_quantile keeps le. It returns the problems, and the series
// names the queries select.
func checkQueries(queries []query, families map[string]*dto.MetricFamily) (used map[string]bool, problems []string) {
	used = map[string]bool{}
	bad := func(q query, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: %s\n\tquery: %s", q.where, fmt.Sprintf(format, args...), q.expr))
	}
	p := parser.NewParser(parser.Options{})
	for _, q := range queries {
		expr, err := p.ParseExpr(expand(q.expr))
		if err != nil {
			bad(q, "PromQL does not parse: %v", err)
			continue
		}
		// needLabels checks that each label is on every series that node
		// selects.
		needLabels := func(node parser.Node, what string, names ...string) {
			for _, vs := range selectors(node) {
				s, ok := lookup(families, vs.Name)
				if !ok {
					continue // reported once, below
				}
				for _, l := range names {
					if !s.labels[l] && !slices.Contains(targetLabels, l) {
						bad(q, "%s label %q is not on %s, whose labels are %v", what, l, vs.Name, slices.Sorted(maps.Keys(s.labels)))
					}
				}
			}
		}
		if q.labelOf != "" {
			needLabels(expr, "label_values'", q.labelOf)
		}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			switch n := node.(type) {
			case *parser.VectorSelector:
				if n.Name == "" {
					bad(q, "a selector without a metric name (%s): the test checks named series only", n)
					return nil
				}
				used[n.Name] = true
				if _, ok := lookup(families, n.Name); !ok {
					bad(q, "series %s is not in the scrape", n.Name)
					return nil
				}
				s, _ := lookup(families, n.Name)
				for _, m := range n.LabelMatchers {
					if m.Name == "__name__" {
						continue
					}
					needLabels(n, "matcher", m.Name)
					// A positive matcher of a fixed value must match a
					// sample: a misspelt value selects nothing.
					positive := m.Type == labels.MatchEqual || m.Type == labels.MatchRegexp
					if positive && !strings.Contains(m.Value, varValue) && s.labels[m.Name] && !matchesSome(s, m) {
						bad(q, "matcher %s matches no sample of %s, whose %s values are %v", m, n.Name, m.Name, values(s, m.Name))
					}
				}
			case *parser.AggregateExpr:
				kind := "by"
				if n.Without {
					kind = "without"
				}
				needLabels(n.Expr, kind, n.Grouping...)
			case *parser.BinaryExpr:
				if vm := n.VectorMatching; vm != nil {
					kind := "on"
					if !vm.On {
						kind = "ignoring"
					}
					needLabels(n.LHS, kind, vm.MatchingLabels...)
					needLabels(n.RHS, kind, vm.MatchingLabels...)
					needLabels(n, "group_left/group_right", vm.Include...)
				}
			case *parser.Call:
				switch n.Func.Name {
				case "label_replace": // (v, dst, replacement, src, regex)
					if src, ok := n.Args[3].(*parser.StringLiteral); ok && src.Val != "" {
						needLabels(n.Args[0], "label_replace source", src.Val)
					}
				case "label_join": // (v, dst, separator, src...)
					for _, a := range n.Args[3:] {
						if src, ok := a.(*parser.StringLiteral); ok {
							needLabels(n.Args[0], "label_join source", src.Val)
						}
					}
				case "histogram_quantile":
					for _, problem := range keepsLe(n.Args[1]) {
						bad(q, "histogram_quantile: %s", problem)
					}
					for _, vs := range selectors(n.Args[1]) {
						if s, ok := lookup(families, vs.Name); ok && !s.labels["le"] {
							bad(q, "histogram_quantile over %s, which is not a histogram's _bucket series", vs.Name)
						}
					}
				}
			}
			return nil
		})
	}
	return used, problems
}

// matchesSome tells whether a sample of s has a label that m matches.
func matchesSome(s series, m *labels.Matcher) bool {
	for _, sample := range s.family.GetMetric() {
		for _, l := range sample.GetLabel() {
			if l.GetName() == m.Name && m.Matches(l.GetValue()) {
				return true
			}
		}
	}
	return false
}

// values returns the values of the label name on the samples of s.
func values(s series, name string) []string {
	set := map[string]bool{}
	for _, sample := range s.family.GetMetric() {
		for _, l := range sample.GetLabel() {
			if l.GetName() == name {
				set[l.GetValue()] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// keepsLe reports the aggregations under a histogram_quantile that drop
// le, without which the quantile has no buckets.
func keepsLe(node parser.Node) []string {
	var problems []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if a, ok := n.(*parser.AggregateExpr); ok && a.Without == slices.Contains(a.Grouping, "le") {
			problems = append(problems, fmt.Sprintf("%s drops le", strings.TrimSpace(a.ShortString())))
		}
		return nil
	})
	return problems
}

// selectors returns the vector selectors under node.
func selectors(node parser.Node) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// checkDashboard returns every problem of the dashboard raw against the
// scrape fams (see checkDashboardShape and checkQueries), and each reqlock
// metric of the scrape that no query shows.
func checkDashboard(raw []byte, fams families) []string {
	queries, problems := checkDashboardShape(raw)
	used, more := checkQueries(queries, fams)
	problems = append(problems, more...)
	shown := map[string]bool{}
	for name := range used {
		if s, ok := lookup(fams, name); ok {
			shown[s.family.GetName()] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		if strings.HasPrefix(name, "reqlock_") && !shown[name] {
			problems = append(problems, fmt.Sprintf("metric %s has no panel in the dashboard", name))
		}
	}
	return problems
}

// families is a parsed scrape, by metric family name.
type families = map[string]*dto.MetricFamily
