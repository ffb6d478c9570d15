// Command oracle answers questions about kubelet's rules with kubelet's own code, built from the
// k8s.io/kubernetes module the test bed pins (molecule/resources/kube/go.mod; see
// ../build-oracle.sh). numa.kube's differential tests (tests/differential) send it generated inputs
// and compare its answers with the collection's.
//
// It reads one JSON request a line on stdin and writes one JSON answer a line on stdout:
//
//	{"kind": "quantity", "text": "1.5Gi"}
//	    resource.ParseQuantity: ok, error, the exact value and kubelet's canonical spelling.
//	{"kind": "kubelet", "config": "<KubeletConfiguration YAML>", "nodes": [bytes, ...], "capacity": bytes,
//	 "cpus": [cores per node, ...], "smt": threads per core, "sockets": [socket of each node, ...],
//	 "sockets_per_node": n}
//	    what a kubelet started on that configuration, on a machine of that shape, does before it
//	    runs pods: load the file (configfiles, the loader kubelet uses), default evictionHard, set
//	    its feature gates, validate it, resolve reservedSystemCPUs, parse kubeReserved/systemReserved
//	    and the hard eviction thresholds, create the Topology, CPU and Memory Managers with the node
//	    allocatable reservation, as NewContainerManager does, then parse every eviction setting as
//	    NewMainKubelet does. The first step that fails is reported with kubelet's error text. Each
//	    request starts from kubelet's default feature gates.
//	{"kind": "flags"}
//	    every top-level KubeletConfiguration (v1beta1) field with its Go type, and the command-line
//	    flags kubelet binds to it (found by the address each flag writes to), deprecated ones marked;
//	    the configuration kubelet defaults an empty file to; and every feature gate with its default,
//	    stage, whether it is locked to its default, and the gates it depends on.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"
	"k8s.io/utils/cpuset"
)

type request struct {
	ID       int      `json:"id"`
	Kind     string   `json:"kind"`
	Text     string   `json:"text"`
	Config   string   `json:"config"`
	Nodes    []uint64 `json:"nodes"`
	Capacity uint64   `json:"capacity"`
	// physical cores per NUMA node, numbered node after node; one each when absent
	CPUs []int `json:"cpus"`
	// threads per core (SMT): thread t of core c is CPU c + t * (all cores), as Linux numbers
	// siblings; 1 when absent
	SMT int `json:"smt"`
	// the socket of each NUMA node's cores; node i is on socket i when absent
	Sockets []int `json:"sockets"`
	// sockets per NUMA node (more sockets than NUMA nodes): core j of a node on socket s is on
	// socket s * n + j % n; 1 when absent
	SocketsPerNode int `json:"sockets_per_node"`
}

type answer struct {
	ID          int               `json:"id"`
	OK          bool              `json:"ok"`
	Stage       string            `json:"stage,omitempty"`
	Error       string            `json:"error,omitempty"`
	Value       string            `json:"value,omitempty"`
	Canonical   string            `json:"canonical,omitempty"`
	Reservation map[string]string `json:"reservation,omitempty"`
	// what kubelet only logs ("Using lenient decoding as strict decoding failed"): unknown or
	// duplicate fields; kubelet then starts on the leniently decoded configuration
	Strict string `json:"strict,omitempty"`
	// kind "flags": JSON field name to the flags that set it ("name" or "name (deprecated)")
	Fields map[string][]string `json:"fields,omitempty"`
	// kind "flags": JSON field name to its Go type (v1beta1), as reflect prints it
	Types map[string]string `json:"types,omitempty"`
	// kind "flags": an empty configuration file after kubelet's defaulting (v1beta1, JSON)
	Defaults json.RawMessage `json:"defaults,omitempty"`
	// kind "flags": every feature gate kubelet knows, with its default and whether it is locked
	Gates map[string]gate `json:"gates,omitempty"`
}

type gate struct {
	Default   bool     `json:"default"`
	Locked    bool     `json:"locked"`
	Stage     string   `json:"stage"`
	DependsOn []string `json:"depends_on,omitempty"`
}

// flags maps each top-level field of KubeletConfiguration to the kubelet flags bound to it: a
// flag's value points at the field (basic types), or holds a pointer to it (maps, lists, the
// reserved memory). The internal and v1beta1 types share their Go field names.
func flags(req request) answer {
	config := &kubeletconfig.KubeletConfiguration{}
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	options.AddKubeletConfigFlags(fs, config)
	// a nested struct's first field shares the struct's address: the kind tells them apart
	type place struct {
		address uintptr
		kind    reflect.Kind
	}
	byAddress := map[place]string{}
	holder := reflect.ValueOf(config).Elem()
	for i := 0; i < holder.NumField(); i++ {
		field := holder.Field(i)
		byAddress[place{field.UnsafeAddr(), field.Kind()}] = holder.Type().Field(i).Name
		if field.Kind() == reflect.Struct && field.NumField() == 1 { // a wrapper such as metav1.Duration
			byAddress[place{field.UnsafeAddr(), field.Field(0).Kind()}] = holder.Type().Field(i).Name
		}
	}
	jsonName := map[string]string{}
	public := reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	fields := map[string][]string{}
	types := map[string]string{}
	for i := 0; i < public.NumField(); i++ {
		field := public.Field(i)
		name := strings.Split(field.Tag.Get("json"), ",")[0]
		if field.Anonymous { // TypeMeta: apiVersion, kind
			for j := 0; j < field.Type.NumField(); j++ {
				fields[strings.Split(field.Type.Field(j).Tag.Get("json"), ",")[0]] = []string{}
			}
			continue
		}
		jsonName[field.Name] = name
		fields[name] = []string{}
		types[name] = field.Type.String()
	}
	fs.VisitAll(func(flag *pflag.Flag) {
		value := reflect.ValueOf(flag.Value)
		candidates := []place{}
		if value.Kind() == reflect.Ptr {
			candidates = append(candidates, place{value.Pointer(), value.Elem().Kind()})
			if value.Elem().Kind() == reflect.Struct {
				inner := value.Elem()
				for i := 0; i < inner.NumField(); i++ {
					if inner.Field(i).Kind() == reflect.Ptr && !inner.Field(i).IsNil() {
						candidates = append(candidates, place{inner.Field(i).Pointer(), inner.Field(i).Elem().Kind()})
					}
				}
			}
		}
		for _, at := range candidates {
			if goName, ok := byAddress[at]; ok {
				label := flag.Name
				if flag.Deprecated != "" {
					label += " (deprecated)"
				}
				if name, known := jsonName[goName]; known {
					fields[name] = append(fields[name], label)
				}
				return
			}
		}
	})
	gates := map[string]gate{}
	dependencies := utilfeature.DefaultMutableFeatureGate.Dependencies()
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		g := gate{Default: spec.Default, Locked: spec.LockToDefault, Stage: string(spec.PreRelease)}
		for _, dependency := range dependencies[name] {
			g.DependsOn = append(g.DependsOn, string(dependency))
		}
		gates[string(name)] = g
	}
	// what kubelet makes of an empty file: the v1beta1 defaults
	empty := &kubeletv1beta1.KubeletConfiguration{}
	kubeletScheme.Default(empty)
	defaults, err := json.Marshal(empty)
	if err != nil {
		return answer{ID: req.ID, Stage: "defaults", Error: err.Error()}
	}
	return answer{ID: req.ID, OK: true, Fields: fields, Types: types, Defaults: defaults, Gates: gates}
}

// kubeletScheme holds kubelet's configuration types with their defaulting functions.
var kubeletScheme = func() *runtime.Scheme {
	s, _, err := scheme.NewSchemeAndCodecs()
	if err != nil {
		panic(err)
	}
	return s
}()

// pristineGates are kubelet's feature gates before any configuration set them; each kubelet
// request starts from a copy, so that one file's gates (AllBeta=false, a gate set against its
// dependencies) do not leak into the next answer.
var pristineGates = utilfeature.DefaultMutableFeatureGate.DeepCopy()

func freshGates() {
	gates := pristineGates.DeepCopy()
	utilfeature.DefaultMutableFeatureGate = gates
	utilfeature.DefaultFeatureGate = gates
}

// widestRange is the widest CPU range the oracle lets kubelet expand: cpuset.Parse walks a range
// one CPU at a time, so 0-4294967295 would take the oracle down rather than answer.
const widestRange = 1 << 20

func tooWide(list string) error {
	for _, part := range strings.Split(list, ",") {
		bounds := strings.SplitN(part, "-", 2)
		if len(bounds) != 2 {
			continue
		}
		low, errLow := strconv.ParseInt(bounds[0], 10, 64)
		high, errHigh := strconv.ParseInt(bounds[1], 10, 64)
		if errLow == nil && errHigh == nil && high-low > widestRange {
			return fmt.Errorf("range %q: kubelet would add its %d CPUs one by one", part, high-low+1)
		}
	}
	return nil
}

// strictCodecs decode as kubelet first tries to: unknown and duplicate fields are errors.
var strictCodecs = func() *serializer.CodecFactory {
	_, codecs, err := scheme.NewSchemeAndCodecs(serializer.EnableStrict)
	if err != nil {
		panic(err)
	}
	return codecs
}()

func quantity(req request) (ans answer) {
	// apimachinery panics on some exponents (0e2147483648): kubelet would crash on them
	defer func() {
		if r := recover(); r != nil {
			ans = answer{ID: req.ID, Stage: "panic", Error: fmt.Sprint(r)}
		}
	}()
	q, err := resource.ParseQuantity(req.Text)
	if err != nil {
		return answer{ID: req.ID, Error: err.Error()}
	}
	// ParseQuantity keeps the text it parsed for String() when that text is already canonical
	// enough; kubelet's error texts print sums, which never carry it. Negating twice drops it.
	printed := q.DeepCopy()
	printed.Neg()
	printed.Neg()
	return answer{ID: req.ID, OK: true, Value: q.AsDec().String(), Canonical: printed.String()}
}

// reservedResources is cmd/kubelet/app's parseResourceList (unexported there): the resources
// kubeReserved and systemReserved may name, parsed and refused as kubelet does.
func reservedResources(m map[string]string) (v1.ResourceList, error) {
	rl := v1.ResourceList{}
	for k, v := range m {
		switch v1.ResourceName(k) {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, "pid":
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("failed to parse quantity %q for %q resource: %w", v, k, err)
			}
			if q.Sign() == -1 {
				return nil, fmt.Errorf("resource quantity for %q cannot be negative: %v", k, v)
			}
			rl[v1.ResourceName(k)] = q
		default:
			return nil, fmt.Errorf("cannot reserve %q resource", k)
		}
	}
	return rl, nil
}

// allocatableReservation is containerManagerImpl.GetNodeAllocatableReservation and the
// hardEvictionReservation it calls (both unexported): for every resource of the capacity, system-
// plus kube-reserved plus what a "less than" hard threshold on memory.available keeps free.
func allocatableReservation(capacity, system, kube v1.ResourceList, thresholds []evictionapi.Threshold) v1.ResourceList {
	eviction := v1.ResourceList{}
	for _, threshold := range thresholds {
		if threshold.Operator == evictionapi.OpLessThan && threshold.Signal == evictionapi.SignalMemoryAvailable {
			memory := capacity[v1.ResourceMemory]
			eviction[v1.ResourceMemory] = *evictionapi.GetThresholdQuantity(threshold.Value, &memory)
		}
	}
	result := v1.ResourceList{}
	for name := range capacity {
		value := resource.NewQuantity(0, resource.DecimalSI)
		value.Add(system[name])
		value.Add(kube[name])
		value.Add(eviction[name])
		if !value.IsZero() {
			result[name] = *value
		}
	}
	return result
}

// kubelet answers for one configuration. kubelet itself panics on some files (an unknown feature
// gate while defaulting); that is reported as the stage "panic", kubelet not starting.
func kubelet(req request, workdir string) (ans answer) {
	defer func() {
		if r := recover(); r != nil {
			ans = answer{ID: req.ID, Stage: "panic", Error: fmt.Sprint(r)}
		}
	}()
	return startKubelet(req, workdir)
}

func startKubelet(req request, workdir string) answer {
	fail := func(stage string, err error) answer { return answer{ID: req.ID, Stage: stage, Error: err.Error()} }
	freshGates()
	dir := filepath.Join(workdir, fmt.Sprint(req.ID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail("setup", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(req.Config), 0o600); err != nil {
		return fail("setup", err)
	}
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, path)
	if err != nil {
		return fail("load", err)
	}
	kc, err := loader.Load(context.Background())
	if err != nil {
		return fail("load", err)
	}
	strict := ""
	if _, _, err := strictCodecs.UniversalDecoder().Decode([]byte(req.Config), nil, nil); err != nil {
		strict = err.Error()
	}
	// as cmd/kubelet/app's loadConfigFile: evictionHard is defaulted after loading
	if kc.EvictionHard == nil {
		kc.EvictionHard = eviction.DefaultEvictionHard
	} else if kc.MergeDefaultEvictionSettings {
		for k, v := range eviction.DefaultEvictionHard {
			if _, set := kc.EvictionHard[k]; !set {
				kc.EvictionHard[k] = v
			}
		}
	}
	// the machine answering is not the node: whether it runs cgroup v1 is not the question asked
	kc.FailCgroupV1 = false
	// kubelet sets the global feature gates from the file before validating it
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(kc.FeatureGates); err != nil {
		return fail("featureGates", err)
	}
	if err := tooWide(kc.ReservedSystemCPUs); err != nil {
		return fail("too-wide", err)
	}
	if err := validation.ValidateKubeletConfiguration(kc, utilfeature.DefaultFeatureGate); err != nil {
		return fail("validate", err)
	}
	machine := describeMachine(req)
	// as cmd/kubelet/app's getReservedCPUs and what follows it: reserved CPUs replace the cpu of
	// kubeReserved and systemReserved
	reservedCPUs := cpuset.New()
	if kc.ReservedSystemCPUs != "" {
		topo, err := topology.Discover(klog.Background(), machine)
		if err != nil {
			return fail("reservedSystemCPUs", fmt.Errorf("unable to discover CPU topology info: %s", err))
		}
		reservedCPUs, err = cpuset.Parse(kc.ReservedSystemCPUs)
		if err != nil {
			return fail("reservedSystemCPUs", fmt.Errorf("unable to parse reserved-cpus list: %s", err))
		}
		if !reservedCPUs.IsSubsetOf(topo.CPUDetails.CPUs()) {
			return fail("reservedSystemCPUs", fmt.Errorf("reserved-cpus: %s is not a subset of online-cpus: %s",
				kc.ReservedSystemCPUs, topo.CPUDetails.CPUs().String()))
		}
		if reservedCPUs.Size() > 0 {
			delete(kc.KubeReserved, "cpu")
			if kc.SystemReserved == nil {
				kc.SystemReserved = map[string]string{}
			}
			kc.SystemReserved["cpu"] = fmt.Sprint(reservedCPUs.Size())
		}
	}
	kube, err := reservedResources(kc.KubeReserved)
	if err != nil {
		return fail("kubeReserved", fmt.Errorf("--kube-reserved value failed to parse: %w", err))
	}
	system, err := reservedResources(kc.SystemReserved)
	if err != nil {
		return fail("systemReserved", fmt.Errorf("--system-reserved value failed to parse: %w", err))
	}
	thresholds, err := eviction.ParseThresholdConfig([]string{}, kc.EvictionHard, nil, nil, nil)
	if err != nil {
		return fail("eviction", err)
	}
	reservation := allocatableReservation(cadvisor.CapacityFromMachineInfo(machine), system, kube, thresholds)
	printed := map[string]string{}
	for name, value := range reservation {
		printed[string(name)] = value.String()
	}
	// the managers in the order NewContainerManager creates them
	topologyManager, err := topologymanager.NewManager(machine.Topology, kc.TopologyManagerPolicy,
		kc.TopologyManagerScope, kc.TopologyManagerPolicyOptions)
	if err != nil {
		return answer{ID: req.ID, Stage: "topologymanager", Error: err.Error(), Reservation: printed, Strict: strict}
	}
	_, err = cpumanager.NewManager(klog.Background(), kc.CPUManagerPolicy, kc.CPUManagerPolicyOptions,
		kc.CPUManagerReconcilePeriod.Duration, machine, reservedCPUs, reservation, dir, topologyManager)
	if err != nil {
		return answer{ID: req.ID, Stage: "cpumanager", Error: err.Error(), Reservation: printed, Strict: strict}
	}
	_, err = memorymanager.NewManager(klog.Background(), kc.MemoryManagerPolicy, machine, reservation,
		kc.ReservedMemory, dir, topologyManager)
	if err != nil {
		return answer{ID: req.ID, Stage: "memorymanager", Error: err.Error(), Reservation: printed, Strict: strict}
	}
	// NewMainKubelet, after the container manager: every eviction setting, soft ones included
	_, err = eviction.ParseThresholdConfig(kc.EnforceNodeAllocatable, kc.EvictionHard, kc.EvictionSoft,
		kc.EvictionSoftGracePeriod, kc.EvictionMinimumReclaim)
	if err != nil {
		return answer{ID: req.ID, Stage: "eviction-settings", Error: err.Error(), Reservation: printed, Strict: strict}
	}
	return answer{ID: req.ID, OK: true, Reservation: printed, Strict: strict}
}

// describeMachine is what cAdvisor would report for the machine of the request: NUMA nodes with
// their memory and cores, each core's threads, each node's socket, and the distances a two-socket
// machine's firmware reports (10 to itself, 20 to the others).
func describeMachine(req request) *cadvisorapi.MachineInfo {
	machine := &cadvisorapi.MachineInfo{MemoryCapacity: req.Capacity}
	smt := req.SMT
	if smt < 1 {
		smt = 1
	}
	cores := 0
	for id := range req.Nodes {
		if req.CPUs != nil {
			cores += req.CPUs[id]
		} else {
			cores++
		}
	}
	core := 0
	sockets := map[int]bool{}
	for id, memory := range req.Nodes {
		count := 1
		if req.CPUs != nil {
			count = req.CPUs[id]
		}
		socket := id
		if req.Sockets != nil {
			socket = req.Sockets[id]
		}
		distances := make([]uint64, len(req.Nodes))
		for other := range distances {
			distances[other] = 20
		}
		distances[id] = 10
		node := cadvisorapi.Node{Id: id, Memory: memory, Distances: distances}
		perNode := req.SocketsPerNode
		if perNode < 1 {
			perNode = 1
		}
		for i := 0; i < count; i++ {
			threads := []int{}
			for t := 0; t < smt; t++ {
				threads = append(threads, core+t*cores)
			}
			on := socket*perNode + i%perNode
			node.Cores = append(node.Cores, cadvisorapi.Core{Id: core, Threads: threads, SocketID: on})
			sockets[on] = true
			core++
		}
		machine.Topology = append(machine.Topology, node)
	}
	machine.NumCores = cores * smt
	machine.NumPhysicalCores = cores
	machine.NumSockets = len(sockets)
	return machine
}

func main() {
	workdir, err := os.MkdirTemp("", "numa-kube-oracle")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(workdir)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		var ans answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			ans = answer{Stage: "request", Error: err.Error()}
		} else if req.Kind == "quantity" {
			ans = quantity(req)
		} else if req.Kind == "kubelet" {
			ans = kubelet(req, workdir)
		} else if req.Kind == "flags" {
			ans = flags(req)
		} else {
			ans = answer{ID: req.ID, Stage: "request", Error: "unknown kind " + req.Kind}
		}
		if err := out.Encode(ans); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
