// Command k8s-validate checks sluice's Kubernetes manifests offline against the real Kubernetes API
// types: every YAML document under the given folder, and every kustomization's build output, is
// decoded strictly (unknown or duplicate fields are errors) into its k8s.io/api type, chosen by
// apiVersion and kind (an unknown kind is an error too). Kustomizations are built in process with
// sigs.k8s.io/kustomize, as `kubectl apply -k` builds them.
//
// Usage: k8s-validate DIR
//
// On success it prints one JSON object on stdout: {"files": {path: [kind...]}, "builds": {dir:
// [object...]}} with each built object as JSON, for the caller's own checks (probes, security
// context...). On any problem it prints every problem on stderr, one per line, and exits 1.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// newObject returns an empty object of the API type for apiVersion/kind, or nil when the kind is
// not one the manifests are expected to use.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	}
	return nil
}

var documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decode strictly decodes one YAML document; it returns the kind, or an error naming the problem.
func decode(doc []byte) (string, error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return "", fmt.Errorf("not YAML: %v", err)
	}
	if meta.APIVersion == "" || meta.Kind == "" {
		return "", fmt.Errorf("no apiVersion or kind")
	}
	obj := newObject(meta.APIVersion, meta.Kind)
	if obj == nil {
		return "", fmt.Errorf("unexpected apiVersion/kind %s/%s", meta.APIVersion, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return "", fmt.Errorf("%s: %v", meta.Kind, err)
	}
	return meta.Kind, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: k8s-validate DIR")
		os.Exit(2)
	}
	root := os.Args[1]
	var problems []string
	files := map[string][]string{}
	var kustomizations []string

	err := filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if entry.Name() == "kustomization.yaml" {
			var k kusttypes.Kustomization
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				problems = append(problems, fmt.Sprintf("%s: Kustomization: %v", path, err))
			}
			kustomizations = append(kustomizations, filepath.Dir(path))
			return nil
		}
		kinds := []string{}
		for i, doc := range documentSeparator.Split(string(data), -1) {
			if len(bytes.TrimSpace([]byte(doc))) == 0 {
				continue
			}
			kind, err := decode([]byte(doc))
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: document %d: %v", path, i+1, err))
				continue
			}
			kinds = append(kinds, kind)
		}
		files[path] = kinds
		return nil
	})
	if err != nil {
		problems = append(problems, err.Error())
	}

	builds := map[string][]json.RawMessage{}
	sort.Strings(kustomizations)
	kustomizer := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	for _, dir := range kustomizations {
		resources, err := kustomizer.Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: kustomize build: %v", dir, err))
			continue
		}
		objects := []json.RawMessage{}
		for _, resource := range resources.Resources() {
			doc, err := resource.AsYAML()
			if err == nil {
				_, err = decode(doc)
			}
			var asJSON []byte
			if err == nil {
				asJSON, err = resource.MarshalJSON()
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: built %s: %v", dir, resource.CurId(), err))
				continue
			}
			objects = append(objects, asJSON)
		}
		builds[dir] = objects
	}

	if len(problems) > 0 {
		for _, problem := range problems {
			fmt.Fprintln(os.Stderr, problem)
		}
		os.Exit(1)
	}
	out, err := json.Marshal(map[string]any{"files": files, "builds": builds})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}
