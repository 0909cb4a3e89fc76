package main

import (
	"net"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// k8sContainer is what the checks read of a container.
type k8sContainer struct {
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe struct {
		Exec struct {
			Command []string `yaml:"command"`
		} `yaml:"exec"`
	} `yaml:"readinessProbe"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

// k8sPodSpec is what the checks read of a pod's spec.
type k8sPodSpec struct {
	Containers []k8sContainer `yaml:"containers"`
	Volumes    []struct {
		Name     string `yaml:"name"`
		HostPath struct {
			Path string `yaml:"path"`
		} `yaml:"hostPath"`
	} `yaml:"volumes"`
}

// hostPathOf is where volume name's mount at mountPath (subPath) lies on
// the node.
func (p k8sPodSpec) hostPathOf(t *testing.T, c k8sContainer, inContainer string) string {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		rel, ok := cutDir(inContainer, vm.MountPath)
		if !ok {
			continue
		}
		for _, v := range p.Volumes {
			if v.Name == vm.Name && v.HostPath.Path != "" {
				return path.Join(v.HostPath.Path, vm.SubPath, rel)
			}
		}
	}
	t.Fatalf("%s is on no hostPath volume", inContainer)
	return ""
}

// cutDir says whether p is dir or under it, and what is left.
func cutDir(p, dir string) (string, bool) {
	if p == dir {
		return "", true
	}
	return strings.CutPrefix(p, dir+"/")
}

// TestKubernetesFilesAgree: what can be checked of the Kubernetes files
// without a cluster. Both parse; the DaemonSet's readiness probe tests a
// file tsock serves at the root of the mountpoint its command mounts; the
// metrics port of --metrics-listen is the container's port and the
// prometheus.io/port annotation; a trial pod's volume is that mountpoint
// on the node. (Every tsock flag in the command: TestDeployFilesParse.)
func TestKubernetesFilesAgree(t *testing.T) {
	var ds struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Template struct {
				Metadata struct {
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"metadata"`
				Spec k8sPodSpec `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var pod struct {
		Kind string     `yaml:"kind"`
		Spec k8sPodSpec `yaml:"spec"`
	}
	for file, into := range map[string]any{"tsock-daemonset.yaml": &ds, "trial-pod.yaml": &pod} {
		data, err := os.ReadFile("../../scripts/deploy/kubernetes/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if ds.Kind != "DaemonSet" || pod.Kind != "Pod" || len(ds.Spec.Template.Spec.Containers) != 1 || len(pod.Spec.Containers) != 1 {
		t.Fatalf("kinds %q and %q", ds.Kind, pod.Kind)
	}
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	if len(c.Args) != 1 {
		t.Fatalf("daemonset args: %q", c.Args)
	}
	m := regexp.MustCompile(`tsock mount (\S+) .*--metrics-listen (\S+)`).FindStringSubmatch(c.Args[0])
	if m == nil {
		t.Fatalf("no tsock mount with --metrics-listen in %q", c.Args[0])
	}
	mountpoint, listen := m[1], m[2]
	probe := c.ReadinessProbe.Exec.Command
	if len(probe) != 3 || probe[0] != "test" || probe[1] != "-e" || probe[2] != path.Join(mountpoint, "status.json") {
		t.Errorf("readiness probe %q: want test -e %s/status.json, a file every mount serves", probe, mountpoint)
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("--metrics-listen %s: %v", listen, err)
	}
	if got := ds.Spec.Template.Metadata.Annotations["prometheus.io/port"]; got != port {
		t.Errorf("prometheus.io/port %q, --metrics-listen port %s", got, port)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || strconv.Itoa(c.Ports[0].ContainerPort) != port {
		t.Errorf("container ports %+v, --metrics-listen port %s", c.Ports, port)
	}
	if p := ds.Spec.Template.Metadata.Annotations["prometheus.io/path"]; p != "/metrics" {
		t.Errorf("prometheus.io/path %q: the metrics listener serves /metrics", p)
	}
	onNode := spec.hostPathOf(t, c, mountpoint)
	trial := pod.Spec.Containers[0]
	dataDir := ""
	for k, a := range trial.Command {
		if a == "--data" && k+1 < len(trial.Command) {
			dataDir = trial.Command[k+1]
		}
	}
	if got := pod.Spec.hostPathOf(t, trial, dataDir); got != onNode {
		t.Errorf("the trial reads %s on the node (its --data %s), tsock mounts %s", got, dataDir, onNode)
	}
}
