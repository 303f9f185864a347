package lws_test

import corev1 "k8s.io/api/core/v1"

type corev1EnvVar = corev1.EnvVar
