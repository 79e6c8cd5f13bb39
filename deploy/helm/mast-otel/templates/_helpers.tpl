{{/* Names and labels shared by every object of the chart. */}}

{{- define "mast-otel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mast-otel.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "mast-otel.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mast-otel.labels" -}}
helm.sh/chart: {{ include "mast-otel.chart" . }}
app.kubernetes.io/name: {{ include "mast-otel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "mast-otel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mast-otel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: collector
{{- end -}}

{{- define "mast-otel.lbSelectorLabels" -}}
app.kubernetes.io/name: {{ include "mast-otel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: load-balancer
{{- end -}}

{{/* The headless service the load balancer's DNS resolver lists replicas through. */}}
{{- define "mast-otel.headlessName" -}}
{{- printf "%s-headless" (include "mast-otel.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mast-otel.lbName" -}}
{{- printf "%s-lb" (include "mast-otel.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mast-otel.secretName" -}}
{{- default (include "mast-otel.fullname" .) .Values.clickhouse.existingSecret -}}
{{- end -}}

{{- define "mast-otel.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The collector's configuration: the user's, with the receivers on the service ports. */}}
{{- define "mast-otel.config" -}}
{{- $receivers := dict
      "grpc" (dict "endpoint" (printf "0.0.0.0:%d" (int .Values.service.grpcPort)))
      "http" (dict "endpoint" (printf "0.0.0.0:%d" (int .Values.service.httpPort))) -}}
{{- $config := mustMergeOverwrite (deepCopy .Values.config) (dict "receivers" $receivers) -}}
{{- if eq (dig "storage" "backend" "chdb" $config) "chdb" -}}
{{- $_ := set $config.storage "data_dir" "/var/lib/mast-otel/data" -}}
{{- else -}}
{{- $server := dict
      "url" .Values.clickhouse.url
      "username" .Values.clickhouse.username
      "password_file" (printf "%s/%s" (include "mast-otel.secretDir" .) .Values.clickhouse.existingSecretPasswordKey) -}}
{{- $_ := set $config.storage "clickhouse" (mustMergeOverwrite (dig "storage" "clickhouse" dict $config) $server) -}}
{{- if .Values.clickhouse.cluster -}}
{{- $_ := set $config.storage "cluster" .Values.clickhouse.cluster -}}
{{- end -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* Where the ClickHouse password Secret is mounted (storage.clickhouse.password_file). */}}
{{- define "mast-otel.secretDir" -}}/etc/mast-otel-secrets{{- end -}}

{{- define "mast-otel.usesClickHouse" -}}
{{- if eq (dig "storage" "backend" "chdb" .Values.config) "clickhouse" -}}true{{- end -}}
{{- end -}}

{{/* The OpenTelemetry Collector configuration of the load-balancing tier. */}}
{{- define "mast-otel.lbConfig" -}}
extensions:
  health_check:
    endpoint: 0.0.0.0:13133
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 0.0.0.0:4317
      http:
        endpoint: 0.0.0.0:4318
processors:
  memory_limiter:
    check_interval: 1s
    limit_percentage: 80
    spike_limit_percentage: 20
exporters:
  loadbalancing:
    routing_key: traceID
    protocol:
      otlp:
        timeout: 10s
        tls:
          insecure: true
        retry_on_failure:
          enabled: true
          max_elapsed_time: 300s
        sending_queue:
          enabled: true
          queue_size: 5000
    resolver:
      dns:
        hostname: {{ printf "%s.%s.svc.cluster.local" (include "mast-otel.headlessName" .) .Release.Namespace }}
        port: {{ .Values.service.grpcPort | toString | quote }}
        interval: {{ .Values.loadBalancer.resolverInterval }}
        timeout: 1s
service:
  extensions: [health_check]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter]
      exporters: [loadbalancing]
    logs:
      receivers: [otlp]
      processors: [memory_limiter]
      exporters: [loadbalancing]
{{- end -}}
