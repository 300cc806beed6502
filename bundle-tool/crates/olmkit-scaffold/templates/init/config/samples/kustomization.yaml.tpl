## One sample per kind and version (`kubectl apply -k config/samples`); they also become the
## CSV's alm-examples.
resources:
# +olmkit:scaffold:manifestskustomizesamples
