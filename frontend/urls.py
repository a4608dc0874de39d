from django.contrib.auth import views as auth_views
from django.urls import path

from frontend import views
from frontend.security import LoginView

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
    path("review/", views.review, name="review"),
]
