from django.contrib.auth import views as auth_views
from django.urls import path

from frontend import views
from frontend.security import LoginView
from frontend.review import experience
from frontend.review import views as review

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("tasks/", views.task_list, name="task_list"),
    path("tasks/<uuid:task_id>/", views.task_detail, name="task_detail"),
    path("console/", views.console, name="console"),
    path("console/tickets/<uuid:ticket_id>/", views.ticket_detail, name="ticket_detail"),
    path("console/tickets/<uuid:ticket_id>/act", views.ticket_action, name="ticket_action"),
    path("review/", review.log, name="review"),
    path("review/facets", review.facets, name="review_facets"),
    path("review/tasks/<uuid:task_id>/", review.replay, name="review_replay"),
    path("review/metrics/", review.metrics, name="review_metrics"),
    path("review/calibration/", review.calibration, name="review_calibration"),
    path("review/calibration/versions/<int:version_id>/rollback", review.rollback_calibrator,
         name="review_calibrator_rollback"),
    path("review/export.zip", review.export, name="review_export"),
    path("review/audit/", review.audit, name="review_audit"),
    path("review/experience/", experience.page, name="review_experience"),
    path("review/experience/forget", experience.forget, name="review_experience_forget"),
    path("review/experience/export.json", experience.export, name="review_experience_export"),
    path("review/experience/import", experience.import_, name="review_experience_import"),
]
