-- Against scikit-learn: with the same init_centroids and tol => 0,
-- memberships, centroids (1e-6 relative) and inertia match scikit-learn's
-- Lloyd KMeans on the Iris, Wine and Digits data sets.  The data and
-- scikit-learn's results come from tests/data/sklearn_reference.py.
\set ECHO none
\i tests/data/sklearn.sql
\set ECHO all
SELECT name, k, array_length(labels, 1) AS n, n_iter FROM sk_expected ORDER BY name;

SELECT s.name,
       (SELECT array_agg(cluster ORDER BY id)
        FROM gpu_kmeans(s.name, s.k, init_centroids => s.init, tol => 0)) = s.labels AS labels_match,
       (SELECT bool_and(abs(a - b) <= 1e-6 * abs(b) + 1e-12)
        FROM unnest(f.centroids, s.centroids) u(a, b)) AS centroids_match,
       abs(f.inertia - s.inertia) <= 1e-6 * s.inertia AS inertia_match,
       f.iterations = s.n_iter AS iterations_match,
       f.converged
FROM sk_expected s, LATERAL gpu_kmeans_fit(s.name, s.k, init_centroids => s.init, tol => 0) f
ORDER BY s.name;
