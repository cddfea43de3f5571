package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// leaseVerbs are exactly the verbs a leader-election Role grants on Leases:
// the ones relect uses (no patch), delete and list for its candidate registry.
var leaseVerbs = []string{"create", "delete", "get", "list", "update", "watch"}

// manifestSet describes one directory of manifests.
type manifestSet struct {
	dir      string
	kinds    []string // exactly these, sorted
	program  string   // the workload runs examples/<program>
	replicas int32    // of the Deployment; 0 for a DaemonSet
	// fieldEnv maps each env var the program reads to the downward API
	// field it must come from.
	fieldEnv map[string]string
	// clusterRules are the ClusterRole's rules, if the set has one.
	clusterRules []rbacv1.PolicyRule
	// relect, for a set that deploys the relect command (cmd/relect)
	// instead of an example program, says how.
	relect *relectUse
	// roleRules are the Role's rules besides the Lease rule.
	roleRules []rbacv1.PolicyRule
	// managerProbes: /healthz and /readyz are served by controller-runtime's
	// manager (HealthProbeBindAddress), with the checks ctrlrt.NewManager
	// adds, not by a handler of the program's own.
	managerProbes bool
}

// relectUse is how a manifest set runs the relect command.
type relectUse struct {
	container  string // the container that runs it
	subcommand string // run or sidecar
	native     bool   // a native sidecar: an init container with restartPolicy Always
}

var manifestSets = []manifestSet{
	{
		dir:      "controller",
		kinds:    []string{"Deployment", "Role", "RoleBinding", "ServiceAccount"},
		program:  "controller",
		replicas: 3,
		fieldEnv: map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"},
	},
	{
		dir:     "daemonset-reporter",
		kinds:   []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "Role", "RoleBinding", "ServiceAccount"},
		program: "daemonset-reporter",
		fieldEnv: map[string]string{
			"POD_NAME":      "metadata.name",
			"POD_NAMESPACE": "metadata.namespace",
			"NODE_NAME":     "spec.nodeName",
		},
		clusterRules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "pods", "namespaces"}, Verbs: []string{"list"}},
		},
	},
	{
		dir:      "controller-runtime",
		kinds:    []string{"Deployment", "Role", "RoleBinding", "ServiceAccount"},
		program:  "controller-runtime",
		replicas: 3,
		fieldEnv: map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"},
		roleRules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "update"}},
		},
		managerProbes: true,
	},
	{
		dir:      "relect-run",
		kinds:    []string{"Deployment", "Role", "RoleBinding", "ServiceAccount"},
		replicas: 2,
		fieldEnv: map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"},
		relect:   &relectUse{container: "job", subcommand: "run"},
	},
	{
		dir:      "relect-sidecar",
		kinds:    []string{"Deployment", "NetworkPolicy", "Role", "RoleBinding", "ServiceAccount"},
		replicas: 2,
		fieldEnv: map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"},
		relect:   &relectUse{container: "relect", subcommand: "sidecar", native: true},
	},
}

// object is one decoded YAML document.
type object struct {
	where string // file#document
	gvk   schema.GroupVersionKind
	obj   runtime.Object
}

// strictDecoder decodes with client-go's scheme, failing on unknown and
// duplicate fields, without converting between versions.
func strictDecoder() runtime.Decoder {
	return serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
}

// decodeAll decodes every YAML document of every .yaml or .yml file under
// deploy/ and returns the objects by top-level directory. A document that
// does not decode strictly fails the test.
func decodeAll(t *testing.T) map[string][]object {
	t.Helper()
	decoder := strictDecoder()
	byDir := map[string][]object{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// A directory with a go.mod is a module of its own, with its own
			// checks (monitoring: not Kubernetes' built-in kinds).
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != "." && err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir, _, _ := strings.Cut(filepath.ToSlash(path), "/")
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 1; ; i++ {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			where := fmt.Sprintf("%s#%d", path, i)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				break
			}
			if j, err := yaml.YAMLToJSON(doc); err == nil && string(bytes.TrimSpace(j)) == "null" {
				continue // comments only
			}
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			byDir[dir] = append(byDir[dir], object{where: where, gvk: *gvk, obj: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return byDir
}

func TestStrictDecoderRejectsUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replicaz: 3\n")
	if _, _, err := strictDecoder().Decode(doc, nil, nil); err == nil {
		t.Fatal("a Deployment with spec.replicaz decoded without error: the decoder is not strict")
	}
}

func TestManifests(t *testing.T) {
	byDir := decodeAll(t)
	for dir := range byDir {
		if dir == "apf" {
			continue // TestAPFManifests
		}
		if !slices.ContainsFunc(manifestSets, func(m manifestSet) bool { return m.dir == dir }) {
			t.Errorf("deploy/%s holds manifests this test does not check: add it to manifestSets", dir)
		}
	}
	for _, m := range manifestSets {
		t.Run(m.dir, func(t *testing.T) { checkSet(t, m, byDir[m.dir]) })
	}
}

func checkSet(t *testing.T, m manifestSet, objs []object) {
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.gvk.Kind)
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, m.kinds) {
		t.Fatalf("kinds %v, want exactly %v", kinds, m.kinds)
	}

	sa := only[*corev1.ServiceAccount](t, objs)
	ns := sa.Namespace
	if ns == "" {
		t.Errorf("ServiceAccount %s has no namespace: the bindings' subjects need one", sa.Name)
	}
	for _, o := range objs {
		meta, ok := o.obj.(metav1.Object)
		if !ok {
			t.Fatalf("%s: %T has no object metadata", o.where, o.obj)
		}
		clusterScoped := o.gvk.Kind == "ClusterRole" || o.gvk.Kind == "ClusterRoleBinding"
		switch {
		case clusterScoped && meta.GetNamespace() != "":
			t.Errorf("%s: cluster-scoped %s has namespace %q", o.where, o.gvk.Kind, meta.GetNamespace())
		case !clusterScoped && meta.GetNamespace() != ns:
			t.Errorf("%s: %s %s is in namespace %q, the ServiceAccount in %q", o.where, o.gvk.Kind, meta.GetName(), meta.GetNamespace(), ns)
		}
	}

	role := only[*rbacv1.Role](t, objs)
	checkLeaseRole(t, role, m.roleRules)
	binding := only[*rbacv1.RoleBinding](t, objs)
	checkBinding(t, "RoleBinding "+binding.Name, binding.RoleRef, binding.Subjects, "Role", role.Name, sa)

	if m.clusterRules != nil {
		cr := only[*rbacv1.ClusterRole](t, objs)
		if !equalRules(cr.Rules, m.clusterRules) {
			t.Errorf("ClusterRole %s rules %+v, want exactly %+v", cr.Name, cr.Rules, m.clusterRules)
		}
		crb := only[*rbacv1.ClusterRoleBinding](t, objs)
		checkBinding(t, "ClusterRoleBinding "+crb.Name, crb.RoleRef, crb.Subjects, "ClusterRole", cr.Name, sa)
	}

	var (
		selector *metav1.LabelSelector
		template corev1.PodTemplateSpec
	)
	if m.replicas > 0 {
		dep := only[*appsv1.Deployment](t, objs)
		if got := dep.Spec.Replicas; got == nil || *got != m.replicas {
			t.Errorf("Deployment %s replicas %s, want %d", dep.Name, fmtPtr(got), m.replicas)
		}
		selector, template = dep.Spec.Selector, dep.Spec.Template
	} else {
		ds := only[*appsv1.DaemonSet](t, objs)
		selector, template = ds.Spec.Selector, ds.Spec.Template
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(template.Labels)) {
		t.Errorf("the workload's selector %v does not select its pod template's labels %v (err %v)", selector, template.Labels, err)
	}
	if m.relect != nil {
		port := checkRelectPod(t, m, template.Spec, sa)
		if slices.Contains(m.kinds, "NetworkPolicy") {
			checkNetworkPolicy(t, only[*networkingv1.NetworkPolicy](t, objs), template, port)
		}
		return
	}
	checkPod(t, m, template.Spec, sa)
}

func fmtPtr(p *int32) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// only returns the one object of type T in objs, failing if there is not
// exactly one.
func only[T runtime.Object](t *testing.T, objs []object) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T, want 1", len(found), zero)
	}
	return found[0]
}

func checkLeaseRole(t *testing.T, role *rbacv1.Role, more []rbacv1.PolicyRule) {
	t.Helper()
	want := append([]rbacv1.PolicyRule{{
		APIGroups: []string{"coordination.k8s.io"},
		Resources: []string{"leases"},
		Verbs:     leaseVerbs,
	}}, more...)
	if !equalRules(role.Rules, want) {
		t.Errorf("Role %s rules %+v, want exactly %+v", role.Name, role.Rules, want)
	}
}

// equalRules compares rules, ignoring the order of the values within each
// field but not the order of the rules.
func equalRules(got, want []rbacv1.PolicyRule) bool {
	sorted := func(s []string) []string { return slices.Sorted(slices.Values(s)) }
	return slices.EqualFunc(got, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(sorted(a.APIGroups), sorted(b.APIGroups)) &&
			slices.Equal(sorted(a.Resources), sorted(b.Resources)) &&
			slices.Equal(sorted(a.Verbs), sorted(b.Verbs)) &&
			slices.Equal(sorted(a.ResourceNames), sorted(b.ResourceNames)) &&
			len(a.NonResourceURLs) == 0 && len(b.NonResourceURLs) == 0
	})
}

func checkBinding(t *testing.T, what string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name string, sa *corev1.ServiceAccount) {
	t.Helper()
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	if ref != wantRef {
		t.Errorf("%s roleRef %+v, want %+v", what, ref, wantRef)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
	if !slices.Equal(subjects, wantSubjects) {
		t.Errorf("%s subjects %+v, want exactly %+v", what, subjects, wantSubjects)
	}
}

// checkPod checks the pod template against the program it runs.
func checkPod(t *testing.T, m manifestSet, pod corev1.PodSpec, sa *corev1.ServiceAccount) {
	t.Helper()
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("pod serviceAccountName %q, want %q", pod.ServiceAccountName, sa.Name)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image == "" {
		t.Errorf("container %s has no image", c.Name)
	}
	source := programSource(t, m.program)

	for name, path := range m.fieldEnv {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 {
			t.Errorf("container %s has no env var %s (downward API %s)", c.Name, name, path)
			continue
		}
		ref := c.Env[i].ValueFrom
		if ref == nil || ref.FieldRef == nil || ref.FieldRef.FieldPath != path ||
			(ref.FieldRef.APIVersion != "" && ref.FieldRef.APIVersion != "v1") {
			t.Errorf("env %s = %+v, want valueFrom.fieldRef.fieldPath %s", name, c.Env[i], path)
		}
		if !strings.Contains(source, `"`+name+`"`) {
			t.Errorf("examples/%s never reads env var %s", m.program, name)
		}
	}

	// Every flag passed must exist in the program, or it would exit at
	// start with "flag provided but not defined".
	for _, arg := range c.Args {
		flagName, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") || !strings.Contains(source, `"`+flagName+`"`) {
			t.Errorf("arg %q: examples/%s defines no flag %q", arg, m.program, flagName)
		}
	}

	for probeName, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("container %s has no HTTP %s probe", c.Name, probeName)
			continue
		}
		path := probe.HTTPGet.Path
		if path != "/healthz" && (probeName == "liveness" || path != "/readyz") {
			t.Errorf("%s probe path %q, want /healthz (or /readyz for readiness)", probeName, path)
		}
		port := probe.HTTPGet.Port
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return (port.StrVal != "" && p.Name == port.StrVal) || (port.StrVal == "" && p.ContainerPort == port.IntVal)
		}) {
			t.Errorf("%s probe port %s is not a port of container %s", probeName, port.String(), c.Name)
		}
		switch {
		case m.managerProbes:
			if !strings.Contains(source, "HealthProbeBindAddress") || !strings.Contains(source, "ctrlrt.NewManager") {
				t.Errorf("examples/%s: %s is served by controller-runtime's manager, but the program sets no HealthProbeBindAddress on a ctrlrt.NewManager", m.program, path)
			}
		case !strings.Contains(source, `"GET `+path+`"`):
			t.Errorf("examples/%s serves no GET %s", m.program, path)
		}
	}
}

// programSource returns the Go source of examples/<program>, concatenated.
func programSource(t *testing.T, program string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "examples", program, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files for examples/%s (err %v)", program, err)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// varRef matches a Kubernetes dependent variable reference, $(NAME), in a
// container's command or args. An undefined one is left as it is.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkRelectPod checks a pod template that runs the relect command: the
// container's arguments are the subcommand, flags the command defines, one
// LEASE in the ServiceAccount's namespace and, for run, a CMD after --; the
// variables they refer to come from the downward API; the liveness probe is
// /healthz on the port of --http-addr; --file lies on a writable volume;
// with --beat-window, --control-addr is written out, loopback, and no port
// of the pod. It returns --http-addr's port.
func checkRelectPod(t *testing.T, m manifestSet, pod corev1.PodSpec, sa *corev1.ServiceAccount) (httpPort string) {
	t.Helper()
	use := m.relect
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("pod serviceAccountName %q, want %q", pod.ServiceAccountName, sa.Name)
	}
	containers := pod.Containers
	if use.native {
		containers = pod.InitContainers
	}
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == use.container })
	if i < 0 {
		t.Fatalf("no container %s (native sidecar: %v)", use.container, use.native)
	}
	c := containers[i]
	if use.native && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
		t.Errorf("init container %s is not a native sidecar (restartPolicy Always): the pod would wait for it to exit", c.Name)
	}
	if c.Image == "" {
		t.Errorf("container %s has no image", c.Name)
	}
	if len(c.Command) > 0 && path.Base(c.Command[0]) != "relect" {
		t.Errorf("container %s command %q, want relect", c.Name, c.Command)
	}
	source := goSource(t, filepath.Join("..", "cmd", "relect"))

	for name, fieldPath := range m.fieldEnv {
		j := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if j < 0 || c.Env[j].ValueFrom == nil || c.Env[j].ValueFrom.FieldRef == nil || c.Env[j].ValueFrom.FieldRef.FieldPath != fieldPath {
			t.Errorf("container %s: env %s must come from the downward API %s", c.Name, name, fieldPath)
		}
	}
	for _, arg := range append(slices.Clone(c.Command), c.Args...) {
		for _, ref := range varRef.FindAllStringSubmatch(arg, -1) {
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == ref[1] }) {
				t.Errorf("arg %q refers to $(%s), which container %s does not define: Kubernetes would pass it literally", arg, ref[1], c.Name)
			}
		}
	}

	args := c.Args
	if len(args) == 0 || args[0] != use.subcommand {
		t.Fatalf("container %s args %q, want relect %s", c.Name, args, use.subcommand)
	}
	flags := map[string]string{}
	var leases []string
	rest := args[1:]
	for len(rest) > 0 && rest[0] != "--" {
		arg := rest[0]
		rest = rest[1:]
		if !strings.HasPrefix(arg, "-") {
			leases = append(leases, arg)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "--") || !hasValue && name != "keep-lease-on-cancel" && name != "verbose" {
			t.Errorf("arg %q: write flags as --name=value", arg)
		}
		if !strings.Contains(source, `"`+name+`"`) {
			t.Errorf("arg %q: relect defines no flag %q", arg, name)
		}
		flags[name] = value
	}
	if len(leases) != 1 {
		t.Fatalf("args %q: want one LEASE (NAMESPACE/NAME), got %q", args, leases)
	}
	ns, name, ok := strings.Cut(leases[0], "/")
	if !ok || (ns != "$(POD_NAMESPACE)" && ns != sa.Namespace) || len(validation.IsDNS1123Subdomain(name)) > 0 {
		t.Errorf("LEASE %q: want $(POD_NAMESPACE)/NAME or %s/NAME: the Role grants only in %s", leases[0], sa.Namespace, sa.Namespace)
	}
	switch use.subcommand {
	case "run":
		if len(rest) < 2 {
			t.Errorf("args %q: relect run needs -- CMD", args)
		}
	case "sidecar":
		if len(rest) > 0 {
			t.Errorf("args %q: relect sidecar takes no CMD", args)
		}
	}

	_, port, err := net.SplitHostPort(flags["http-addr"])
	if err != nil {
		t.Fatalf("--http-addr=%q: %v (the probes need it)", flags["http-addr"], err)
	}
	probe := c.LivenessProbe
	if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" {
		t.Errorf("container %s: want a liveness probe GET /healthz", c.Name)
	} else if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return fmt.Sprint(p.ContainerPort) == port &&
			(probe.HTTPGet.Port.StrVal == p.Name || probe.HTTPGet.Port.IntValue() == int(p.ContainerPort))
	}) {
		t.Errorf("container %s: the liveness probe's port %s is not --http-addr's %s", c.Name, probe.HTTPGet.Port.String(), port)
	}
	if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Path == "/leader" {
		t.Errorf("container %s: readiness must not follow leadership", c.Name)
	}
	if file := flags["file"]; file != "" {
		if !slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool {
			return !v.ReadOnly && strings.HasPrefix(path.Dir(file)+"/", strings.TrimSuffix(v.MountPath, "/")+"/")
		}) {
			t.Errorf("--file=%s is on no writable volume of container %s", file, c.Name)
		}
	}
	checkControlAddr(t, c, flags)
	return port
}

// checkControlAddr checks where a relect sidecar with --beat-window serves
// POST /beat: the manifest says it (--control-addr written out), on a
// loopback address — a beat is not authenticated, and whoever sends one
// keeps a leader leading — never exposed, and not listed as a port of the
// pod.
func checkControlAddr(t *testing.T, c corev1.Container, flags map[string]string) {
	t.Helper()
	if _, beats := flags["beat-window"]; !beats {
		if _, ok := flags["control-addr"]; ok {
			t.Errorf("container %s: --control-addr without --beat-window (relect refuses it)", c.Name)
		}
		return
	}
	addr, ok := flags["control-addr"]
	if !ok {
		t.Fatalf("container %s: --beat-window without --control-addr: say where POST /beat is served", c.Name)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--control-addr=%q: %v", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("--control-addr=%s is not a loopback IP: anyone who reaches it can keep a stuck leader leading", addr)
	}
	if _, ok := flags["expose-control"]; ok {
		t.Errorf("container %s: --expose-control in an example", c.Name)
	}
	if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return fmt.Sprint(p.ContainerPort) == port }) {
		t.Errorf("container %s lists --control-addr's port %s as a port of the pod: it is loopback only", c.Name, port)
	}
}

// checkNetworkPolicy checks a NetworkPolicy beside a relect pod: it selects
// the pod template, isolates its ingress, and admits relect's --http-addr
// port only (httpPort; the read-only endpoints), from somewhere named —
// never from everywhere, never another port.
func checkNetworkPolicy(t *testing.T, np *networkingv1.NetworkPolicy, template corev1.PodTemplateSpec, httpPort string) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(template.Labels)) {
		t.Errorf("NetworkPolicy %s: podSelector %v does not select the pod template's labels %v (err %v)", np.Name, np.Spec.PodSelector, template.Labels, err)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("NetworkPolicy %s: policyTypes %v, want Ingress: the pods' ingress is what it restricts", np.Name, np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Errorf("NetworkPolicy %s admits nothing: the probes' port must stay open to Prometheus and the namespace", np.Name)
	}
	for i, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 {
			t.Errorf("NetworkPolicy %s ingress[%d] admits every source: name them", np.Name, i)
		}
		if len(rule.Ports) == 0 {
			t.Errorf("NetworkPolicy %s ingress[%d] admits every port: want --http-addr's %s only", np.Name, i, httpPort)
		}
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.String() != httpPort || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) || p.EndPort != nil {
				t.Errorf("NetworkPolicy %s ingress[%d] admits port %+v: want TCP %s (--http-addr) only", np.Name, i, p, httpPort)
			}
		}
	}
}

// goSource returns the Go source of the non-test files in dir, concatenated.
func goSource(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (err %v)", dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// deploy/apf gives a relect fleet a priority level of its own: a
// FlowSchema that matches the fleet's ServiceAccount (deploy/daemonset-
// reporter's) on the Leases of its namespace, for every verb relect uses,
// ahead of the built-in service-accounts schema, and the priority level it
// names.
func TestAPFManifests(t *testing.T) {
	byDir := decodeAll(t)
	objs := byDir["apf"]
	plc := only[*flowcontrolv1.PriorityLevelConfiguration](t, objs)
	fs := only[*flowcontrolv1.FlowSchema](t, objs)
	if fs.Spec.PriorityLevelConfiguration.Name != plc.Name {
		t.Errorf("FlowSchema %s names priority level %q, not %q", fs.Name, fs.Spec.PriorityLevelConfiguration.Name, plc.Name)
	}
	if p := fs.Spec.MatchingPrecedence; p <= 1000 || p >= 9000 {
		t.Errorf("matchingPrecedence %d: want after the system schemas and before service-accounts (9000)", p)
	}
	if plc.Spec.Type != flowcontrolv1.PriorityLevelEnablementLimited || plc.Spec.Limited == nil ||
		plc.Spec.Limited.LimitResponse.Type != flowcontrolv1.LimitResponseTypeQueue {
		t.Errorf("priority level %s: want Limited, queuing", plc.Name)
	}
	sa := only[*corev1.ServiceAccount](t, byDir["daemonset-reporter"])
	if len(fs.Spec.Rules) != 1 || len(fs.Spec.Rules[0].Subjects) != 1 || len(fs.Spec.Rules[0].ResourceRules) != 1 {
		t.Fatalf("FlowSchema %s: want one rule, one subject, one resource rule", fs.Name)
	}
	subject, rule := fs.Spec.Rules[0].Subjects[0], fs.Spec.Rules[0].ResourceRules[0]
	if subject.ServiceAccount == nil || subject.ServiceAccount.Name != sa.Name || subject.ServiceAccount.Namespace != sa.Namespace {
		t.Errorf("subject %+v: want the ServiceAccount %s/%s", subject, sa.Namespace, sa.Name)
	}
	if !slices.Equal(rule.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(rule.Resources, []string{"leases"}) ||
		!slices.Equal(rule.Namespaces, []string{sa.Namespace}) {
		t.Errorf("resource rule %+v: want leases in %s", rule, sa.Namespace)
	}
	verbs := slices.Sorted(slices.Values(rule.Verbs))
	if !slices.Equal(verbs, leaseVerbs) {
		t.Errorf("verbs %v: want every verb relect uses, %v", verbs, leaseVerbs)
	}
}
